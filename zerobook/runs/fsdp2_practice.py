"""FSDP2 in practice: what a real job does with `fully_shard`, each measured on the ranks.

    python -m torch.distributed.run --standalone --nproc-per-node 3 -m zerobook.runs.fsdp2_practice --parts meta,dtensor,reshard,accumulate,wrapping,offload,prefetch

Parts (each reports a dict):
  meta        build the model on the meta device (no storage), shard it, `to_empty`, initialise:
              the bytes each rank ever holds, and why the buffers must be initialised again
  dtensor     per-parameter sharding: each parameter a DTensor cut on dim 0 (torch.chunk), its
              padding against a flat buffer's; the optimizer's state and the state dict are DTensors
  reshard     `reshard_after_forward`: None (the default: True but for the root), True (gather
              every unit again in backward), False (keep every unit gathered from forward on):
              all-gather bytes per step
  accumulate  4 micro-batches per step, with and without `set_requires_gradient_sync(False)` on
              the first 3: reduce-scatters per step, the gradients they give, and the unsharded
              gradients FSDP2 keeps between micro-batches when it does not sync
  wrapping    one unit per block, per Linear, or the whole model: all-gathers and reduce-scatters
              per step, bytes gathered, and the most bytes gathered at once (FSDP2's profiler ranges)
  offload     `CPUOffloadPolicy()` as torch sets it (pinned host memory), then unpinned beside no
              offload: what it refuses, where the shards and gradients live, the same gradients?
  prefetch    FSDP2's implicit prefetch against explicit `set_modules_to_forward_prefetch` (the next
              block) and `set_modules_to_backward_prefetch` (the two blocks before): all-gathers in order
"""

import argparse

import torch
from torch.distributed.fsdp import CPUOffloadPolicy

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.fsdp2 import local, shard_blocks, traced_step, unsharded_grad_bytes
from zerobook.train.models import GPT, GPTConfig, next_token_loss, sinusoidal_positions
from zerobook.train.training import rank_batch
from zerobook.zero.flat import FlatParams

CONFIG = GPTConfig(vocab=128, hidden=64, layers=3, heads=4, seq_len=32)
BATCH = 4


def batches(me):
    """This rank's batch of each step: step -> tokens."""
    return lambda step: rank_batch(CONFIG, BATCH, step, me)


def sharded(model, me, units=None, **options):
    """fully_shard each of `units` (every block unless told: the course's units), then the root,
    with `options`."""
    shard_blocks(model, me, blocks=units, **options)
    return model


def init_weights(model) -> None:
    """What a meta-device model needs after `to_empty`: every parameter and every buffer set
    (`reset_parameters` on the modules that have one, the course's embedding scale, the buffers)."""
    for module in model.modules():
        if hasattr(module, "reset_parameters") and module is not model:
            module.reset_parameters()
    torch.nn.init.normal_(model.embed.weight, std=0.02)
    with torch.no_grad():
        model.positions.copy_(sinusoidal_positions(CONFIG.seq_len, CONFIG.hidden))
        for block in model.blocks:
            block.attn.causal.copy_(torch.ones_like(block.attn.causal).tril())


def meta(me) -> dict:
    with torch.device("meta"):
        model = GPT(CONFIG)
    on_meta = all(p.is_meta for p in model.parameters())
    sharded(model, me)
    model.to_empty(device=me.device)
    garbage = not torch.equal(
        model.positions.cpu(), sinusoidal_positions(CONFIG.seq_len, CONFIG.hidden)
    )
    init_weights(model)
    loss = next_token_loss(model, rank_batch(CONFIG, BATCH, 0, me))
    loss.backward()
    return {
        "on_meta": on_meta,
        "buffers_garbage_before_init": garbage,
        "loss": loss.item(),
        "local_bytes": sum(
            local(p).numel() * local(p).element_size() for p in model.parameters()
        ),
        "full_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "embed_std": model.embed.weight.full_tensor().std().item(),
    }


def dtensor(me) -> dict:
    model = sharded(GPT(CONFIG), me)
    optimizer = torch.optim.AdamW(model.parameters())
    next_token_loss(model, rank_batch(CONFIG, BATCH, 0, me)).backward()
    optimizer.step()
    rows = [
        {
            "name": n,
            "full": list(p.shape),
            "local": list(local(p).shape),
            "placement": str(p.placements[0]),
        }
        for n, p in model.named_parameters()
    ]
    chunk = lambda d0: -(-d0 // me.world_size)  # noqa: E731 - torch.chunk's piece on dim 0
    # the blocks', as for the flat buffers
    per_param_padding = sum(
        (chunk(p.shape[0]) * me.world_size - p.shape[0]) * p[0].numel()
        for p in model.blocks.parameters()
    )
    flat = [FlatParams(list(b.parameters()), me.world_size) for b in GPT(CONFIG).blocks]
    state = optimizer.state[next(iter(model.parameters()))]
    return {
        "params": rows,
        "padding_per_parameter": per_param_padding,
        "padding_flat_per_block": sum(f.padded - f.numel for f in flat),
        "optimizer_state_type": type(state["exp_avg"]).__name__,
        "state_dict_type": type(next(iter(model.state_dict().values()))).__name__,
    }


def gathered_bytes(model, me, steps: int = 2) -> int:
    """All-gather bytes of the last of `steps` training steps (the first initialises FSDP2)."""
    optimizer = torch.optim.AdamW(model.parameters())
    for step in range(steps):
        with CommMeter() as meter:
            next_token_loss(model, rank_batch(CONFIG, BATCH, step, me)).backward()
        optimizer.step()
        optimizer.zero_grad()
    return meter.summary().get("all_gather_into_tensor", {}).get("bytes", 0)


def reshard(me) -> dict:
    return {
        str(flag): gathered_bytes(
            sharded(GPT(CONFIG), me, reshard_after_forward=flag), me
        )
        for flag in (None, True, False)
    }


def accumulate(me, micro: int = 4) -> dict:
    """`micro` micro-batches, reduce-scattering after each or only after the last: reduce-scatters
    per step, the gradients, and the unsharded gradient bytes waiting after the next-to-last."""
    out = {}
    for sync_each in (True, False):
        torch.manual_seed(0)
        model = sharded(GPT(CONFIG), me)
        with CommMeter() as meter:
            for k in range(micro):
                model.set_requires_gradient_sync(sync_each or k == micro - 1)
                next_token_loss(model, rank_batch(CONFIG, BATCH, k, me)).backward()
                if k == micro - 2:
                    waiting = unsharded_grad_bytes(model)
        grads = torch.cat([local(p.grad).reshape(-1) for p in model.parameters()])
        out["every" if sync_each else "last"] = {
            "reduce_scatters": meter.summary()["reduce_scatter_tensor"]["calls"],
            "grads": grads,
            "unsharded_grad_bytes": waiting,
        }
        del model, grads
    diff = (out["every"].pop("grads") - out["last"]["grads"]).abs().max().item()
    scale = out["last"].pop("grads").abs().max().item()
    return dict(
        out,
        diff=diff,
        scale=scale,
        units=CONFIG.layers + 1,
        micro=micro,
        full_grad_bytes=sum(p.numel() * 4 for p in GPT(CONFIG).parameters()),
    )


WRAPPINGS = {
    "block": lambda model: list(model.blocks),
    "linear": lambda model: [
        m for m in model.blocks.modules() if isinstance(m, torch.nn.Linear)
    ],
    "model": lambda model: [],
}


def wrapping(me) -> dict:
    """The same model and step, wrapped as each of WRAPPINGS says (then the root)."""
    out = {}
    for name, units in WRAPPINGS.items():
        model = GPT(CONFIG)
        out[name] = traced_step(sharded(model, me, units(model)), batches(me))
    return out


def refusal(me, **options) -> str | None:
    """fully_shard with `options`: None if accepted, else the error's type and message."""
    try:
        sharded(GPT(CONFIG), me, **options)
    except RuntimeError as error:
        return f"{type(error).__name__}: {error}"
    return None


def offload(me) -> dict:
    """CPUOffloadPolicy() (pinned host memory) tried; then pin_memory=False beside no offload: the
    devices of the shards and gradients, the collectives, and whether the gradients are equal."""
    runs = {}
    for name, options in (
        ("none", {}),
        ("unpinned", {"offload_policy": CPUOffloadPolicy(pin_memory=False)}),
    ):
        torch.manual_seed(0)
        model = sharded(GPT(CONFIG), me, **options)
        with CommMeter() as meter:
            next_token_loss(model, rank_batch(CONFIG, BATCH, 0, me)).backward()
        shards = [local(p) for p in model.parameters()] + [
            local(p.grad) for p in model.parameters()
        ]
        runs[name] = {
            "devices": sorted({str(t.device) for t in shards}),
            "calls": {op: e["calls"] for op, e in meter.summary().items()},
            "grads": torch.cat(
                [local(p.grad).reshape(-1).cpu() for p in model.parameters()]
            ),
        }
    same = torch.equal(runs["none"].pop("grads"), runs["unpinned"].pop("grads"))
    return dict(
        runs,
        pinned=refusal(me, offload_policy=CPUOffloadPolicy()),
        same_grads=same,
        device=me.device,
    )


def prefetch(me, ahead_backward: int = 2) -> dict:
    """Blocks as units: FSDP2's implicit prefetch, then explicit (each block prefetches
    the next in forward and the `ahead_backward` before it in backward)."""
    out = {}
    for explicit in (False, True):
        model = sharded(GPT(CONFIG), me)
        blocks = list(model.blocks)
        for i, block in enumerate(blocks if explicit else []):
            block.set_modules_to_forward_prefetch(blocks[i + 1 : i + 2])
            before = blocks[max(i - ahead_backward, 0) : i]
            block.set_modules_to_backward_prefetch(before[::-1])  # the nearest first
        out["explicit" if explicit else "implicit"] = traced_step(model, batches(me))
    return dict(out, ahead_backward=ahead_backward)


PARTS = {
    "meta": meta,
    "dtensor": dtensor,
    "reshard": reshard,
    "accumulate": accumulate,
    "wrapping": wrapping,
    "offload": offload,
    "prefetch": prefetch,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parts", default=",".join(PARTS))
    cli = parser.parse_args()
    me = zb.setup()
    zb.report(
        world_size=me.world_size,
        **{name: PARTS[name](me) for name in cli.parts.split(",")},
    )


if __name__ == "__main__":
    main()
