"""Lab 1 harness: the student's byte counter against zerobook.train.measure, on every rank.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.labs.memory --student memory_student.py --part mixed

Each rank trains the course's GPT one step under DDP with a precision recipe, then hands the
student's `count_state_bytes(params, grads, optimizer_states)` the live tensors and reports its
answer next to zerobook.train.measure's. Parts: `fp32` (torch.optim.AdamW), `mixed` (bf16 weights and
grads, MixedPrecisionAdamW), `flat` (weights that are views into one padded flat buffer, as the
ZeRO chapters will keep them), `arena` (after the step, weights, gradients and AdamW's two moments
are views into one padded buffer: one storage in all three lists, counted once, in the first
list that holds it). Each report says, per list, the bytes of its storages that an earlier list
holds (`shared`), so a count that keeps its storages apart per list only is named as such.
"""

import torch
from torch.nn.parallel import DistributedDataParallel

import zerobook as zb
from zerobook.train import measure
from zerobook.labs.harness import call_student, load_student, parse_args
from zerobook.train.models import GPT, GPTConfig, next_token_loss, random_batch
from zerobook.train.precision import MixedPrecisionAdamW

PARTS = ("fp32", "mixed", "flat", "arena")
CONFIG = GPTConfig(vocab=128, hidden=128, layers=2, heads=4, seq_len=32)


ALIGN = (
    4096  # elements per shard boundary: shards start aligned, as real flat buffers do
)


def flatten_into_one_buffer(model: torch.nn.Module, world_size: int) -> torch.Tensor:
    """Make every weight a view into one flat buffer padded to a multiple of world_size x ALIGN."""
    params = list(model.parameters())
    numel = sum(p.numel() for p in params)
    flat = torch.zeros(numel + (-numel) % (world_size * ALIGN), dtype=params[0].dtype)
    offset = 0
    for p in params:
        flat[offset : offset + p.numel()].copy_(p.detach().flatten())
        p.data = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat


def share_one_arena(model: torch.nn.Module, optimizer, world_size: int) -> torch.Tensor:
    """Make every weight, gradient and AdamW moment a view into one buffer, padded as
    flatten_into_one_buffer pads (one allocation for every model state)."""
    params = list(model.parameters())
    numel = 4 * sum(p.numel() for p in params)
    arena = torch.zeros(numel + (-numel) % (world_size * ALIGN), dtype=params[0].dtype)
    arena, offset = arena.to(params[0].device), 0

    def place(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal offset
        view = arena[offset : offset + tensor.numel()].view_as(tensor)
        offset += tensor.numel()
        return view.copy_(tensor)

    for p in params:
        p.data, p.grad = place(p.data), place(p.grad)
        state = optimizer.state[p]
        state["exp_avg"], state["exp_avg_sq"] = (
            place(state["exp_avg"]),
            place(state["exp_avg_sq"]),
        )
    return arena


def shared_bytes(lists: dict) -> dict:
    """Per list, the bytes of its storages (each once) that an earlier list also holds."""
    seen, shared = set(), {}
    for name, tensors in lists.items():
        mine = {measure.storage_key(t): t.untyped_storage().nbytes() for t in tensors}
        shared[name] = sum(n for key, n in mine.items() if key in seen)
        seen |= set(mine)
    return shared


def train_one_step(part: str, me: zb.Rank):
    """The model and optimizer of `part` after one DDP step."""
    torch.manual_seed(0)
    model = GPT(CONFIG)
    if part == "mixed":
        model = model.to(torch.bfloat16)
    if part == "flat":
        flatten_into_one_buffer(model, me.world_size)
    model = model.to(me.device)
    optimizer = (
        MixedPrecisionAdamW(model.parameters())
        if part == "mixed"
        else torch.optim.AdamW(model.parameters())
    )
    ddp = DistributedDataParallel(model, gradient_as_bucket_view=True)
    next_token_loss(ddp, random_batch(CONFIG, 4, seed=me.rank).to(me.device)).backward()
    optimizer.step()
    if part == "arena":
        share_one_arena(model, optimizer, me.world_size)
    return model, optimizer


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    student = load_student(cli.student)
    model, optimizer = train_one_step(cli.part, me)
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    states = list(measure.optimizer_tensors(optimizer))
    shared = shared_bytes({"params": params, "grads": grads, "optimizer": states})
    answer = call_student(student, "count_state_bytes", params, grads, states)
    reference = measure.model_state_bytes(model, optimizer)
    zb.report(
        answer=answer,
        num_params=measure.num_params(model),
        reference={
            "params": reference.params,
            "grads": reference.grads,
            "optimizer": reference.optimizer,
        },
        shared=shared,
    )


if __name__ == "__main__":
    main()
