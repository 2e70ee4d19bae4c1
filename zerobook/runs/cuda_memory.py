"""The CUDA allocator's bytes per rank under DDP and ZeRO-1/2/3 (and ZeRO-Offload) against the
calculator's model states: one mixed-precision AdamW model, each method in turn.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.cuda_memory --hidden 1024 --layers 8

Each method builds the same bf16 model (seed 0), takes one full step (AdamW's moments now exist),
then a second backward. Right after that backward every model state is alive and the activations
are freed: that moment is read three ways, per term (params, grads, optimizer state):

    calculator  zerobook.accounting.memory.model_state_bytes(Ψ, stage, N): 2Ψ + 2Ψ + 12Ψ, divided by N per stage
    live        the bytes of the tensors each term names, each storage once (zerobook.train.measure)
    allocator   torch.cuda.memory_allocated() above what was allocated before the model existed

and the peak of that second step (torch.cuda.max_memory_allocated() from its start, the same
base): the model states plus activations, gathered units, buckets and the optimizer's temporaries;
and, for fragmentation, the allocator's absolute peaks over the step: bytes allocated, and bytes
reserved from the driver (max_memory_reserved: the cached blocks, holes included). On CPU the
allocator figures are None and the rest still runs (the dry run `make test` checks).
"""

import argparse
import gc

import torch
from torch.nn.parallel import DistributedDataParallel

import zerobook as zb
from zerobook.train import measure
from zerobook.accounting.memory import model_state_bytes
from zerobook.train.models import GPT, Block, GPTConfig, next_token_loss, random_batch
from zerobook.train.precision import MixedPrecisionAdamW
from zerobook.train.training import train_step
from zerobook.zero import Zero1AdamW, Zero2AdamW, Zero3AdamW

STAGE = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3, "zero3_offload": 3}


def build(method: str, config: GPTConfig, device: str):
    """(model to call, bare model, optimizer, Ψ): the same bf16 model from seed 0 for every method."""
    torch.manual_seed(0)
    model = GPT(config).to(device=device, dtype=torch.bfloat16)
    num_params = sum(p.numel() for p in model.parameters())  # tied ones once
    return (*wrap(method, model), num_params)


def wrap(method: str, model):
    """(model to call, bare model, optimizer) for one method."""
    if method == "ddp":
        ddp = DistributedDataParallel(
            model, gradient_as_bucket_view=True
        )  # its buckets are the grads
        return ddp, model, MixedPrecisionAdamW(model.parameters())
    if method == "zero1":
        return model, model, Zero1AdamW(model.parameters())
    if method == "zero2":
        return model, model, Zero2AdamW(model.parameters(), bucket_numel=2**20)
    offload = "cpu" if method == "zero3_offload" else None
    return model, model, Zero3AdamW(model, unit_types=(Block,), offload=offload)


def live_terms(method: str, model, optimizer, device: str) -> dict:
    """Bytes on `device` of the tensors each term names (each storage once): 16-bit params (ZeRO-3:
    its shards), grads (DDP's buckets, ZeRO-1's flat buffer, ZeRO-2/3's shards) and the optimizer
    (the fp32 master and AdamW's moments); `gathered`: ZeRO-3's full units still allocated."""
    on = lambda tensors: [
        t for t in tensors if t is not None and t.device == torch.device(device)
    ]
    seen: set = set()
    if STAGE[method] < 3:
        params = measure.unique_bytes(on(model.parameters()), seen)
        grads = [p.grad for p in model.parameters()] + [
            getattr(optimizer, "grad_shard", None)
        ]
        gathered = 0
    else:
        params = measure.unique_bytes(on(u.shard for u in optimizer.units), seen)
        grads = [u.grad_shard for u in optimizer.units]
        gathered = sum(u.flat.flat.untyped_storage().nbytes() for u in optimizer.units)
    grads = measure.unique_bytes(on(grads), seen)
    state = measure.unique_bytes(on(measure.optimizer_tensors(optimizer)), seen)
    return dict(
        params=params,
        grads=grads,
        optimizer=state,
        total=params + grads + state,
        gathered=gathered,
    )


def allocated(device: str) -> int | None:
    """Bytes the CUDA caching allocator has handed out to live tensors (None on CPU)."""
    return torch.cuda.memory_allocated(device) if device.startswith("cuda") else None


def fresh(device: str) -> int | None:
    """Free the last method's tensors, reset the peak, and return the base to measure from."""
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    return allocated(device)


def measure_method(
    method: str, config: GPTConfig, batch_size: int, me: zb.Rank
) -> dict:
    """One method: the three readings right after the second backward, and that step's peak."""
    base = fresh(me.device)
    wrapped, model, optimizer, num_params = build(method, config, me.device)
    batch = random_batch(config, batch_size, seed=me.rank).to(me.device)
    train_step(wrapped, optimizer, batch)  # AdamW's moments now exist
    if base is not None:
        torch.cuda.reset_peak_memory_stats(
            me.device
        )  # the peak of the measured step, not of building
    next_token_loss(wrapped, batch).backward()
    if hasattr(optimizer, "finish_backward"):
        optimizer.finish_backward()  # ZeRO-2: its last buckets reduced into the shard
    now = allocated(me.device)
    live = live_terms(method, model, optimizer, me.device)
    optimizer.step()
    optimizer.zero_grad()
    peak = torch.cuda.max_memory_allocated(me.device) if base is not None else None
    calc = model_state_bytes(num_params, stage=STAGE[method], world_size=me.world_size)
    calc = dict(
        params=calc.params,
        grads=calc.grads,
        optimizer=0.0 if method.endswith("offload") else calc.optimizer,
    )
    calc["total"] = sum(calc.values())
    cuda = (
        None
        if base is None
        else dict(
            states=now - base,
            peak=peak - base,
            allocated_peak=peak,
            reserved_peak=torch.cuda.max_memory_reserved(me.device),
        )
    )
    del wrapped, model, optimizer, batch
    return dict(
        stage=STAGE[method],
        num_params=num_params,
        calculator=calc,
        live=live,
        cuda=cuda,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--methods", default=",".join(STAGE))
    cli = parser.parse_args()
    me = zb.setup()
    config = GPTConfig(
        vocab=cli.vocab,
        hidden=cli.hidden,
        layers=cli.layers,
        heads=max(1, cli.hidden // 64),
        seq_len=128,
    )
    zb.report(
        world_size=me.world_size,
        device=me.device,
        backend=me.backend,
        methods={
            m: measure_method(m, config, cli.batch, me) for m in cli.methods.split(",")
        },
    )


if __name__ == "__main__":
    main()
