"""Gradient accumulation's traffic: the elements each way of training sends in one optimizer step
of k micro-batches, k = 1, 2, 4, counted per collective by the CommMeter.

    python -m torch.distributed.run --standalone --nproc-per-node 3 -m zerobook.runs.accumulation

Ours: DDP (all-reduce after the last micro-batch: no_sync), stage 1 (reduce-scatter in the step),
stage 2 reducing every micro-batch and under no_sync, stage 3 (gathers and reduce-scatters in
every micro-batch); PyTorch's FSDP2 (one unit per block, then the root) syncing every backward
and with `set_requires_gradient_sync(False)` on all but the last. Every rank reports, per way
and k, {collective: elements sent (nccl-tests' bus bytes / element size)} and the elements
each way shards or reduces (`reduced`: its flat buffer padded to N, or the parameters).
"""

import argparse
import contextlib

import torch

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.data_parallel.ddp import average_gradients
from zerobook.fsdp2 import shard_blocks
from zerobook.train.models import GPT, Block, GPTConfig, next_token_loss
from zerobook.train.precision import MixedPrecisionAdamW
from zerobook.train.training import rank_batch
from zerobook.zero import Zero1AdamW, Zero2AdamW, Zero3AdamW

CONFIG = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)
LR, BUCKET_NUMEL = 1e-3, 2**13
WAYS = ("ddp", "zero1", "zero2", "zero2_no_sync", "zero3", "fsdp2", "fsdp2_no_sync")


def build(way: str, model, me):
    """(optimizer, the context of micro-batch m of k, what runs after the micro-batches)."""
    params = list(model.parameters())
    nothing = lambda m, k: contextlib.nullcontext()  # noqa: E731
    if way == "ddp":
        optimizer = MixedPrecisionAdamW(params, lr=LR)
        return optimizer, nothing, lambda: average_gradients(model, flat=True)
    if way == "zero1":
        return Zero1AdamW(params, lr=LR), nothing, lambda: None
    if way.startswith("zero2"):
        optimizer = Zero2AdamW(params, lr=LR, bucket_numel=BUCKET_NUMEL)
        if way == "zero2_no_sync":
            return (
                optimizer,
                lambda m, k: (
                    optimizer.no_sync() if m < k - 1 else contextlib.nullcontext()
                ),
                lambda: None,
            )
        return optimizer, nothing, lambda: None
    if way == "zero3":
        return Zero3AdamW(model, unit_types=(Block,), lr=LR), nothing, lambda: None
    shard_blocks(model, me)  # fp32: one unit per block, then the root

    @contextlib.contextmanager
    def sync(m, k):
        model.set_requires_gradient_sync(way == "fsdp2" or m == k - 1)
        yield

    return torch.optim.AdamW(model.parameters(), lr=LR), sync, lambda: None


def reduced(way: str, model, optimizer) -> int:
    """The elements a way reduces per micro-batch it syncs: its flat buffer (padded to N), or
    the parameters (DDP's one flat all-reduce; FSDP2 pads each parameter's rows: see its meter)."""
    if way == "zero3":
        return sum(u.flat.padded for u in optimizer.units)
    if way.startswith(("zero1", "zero2")):
        return optimizer.flat.padded
    return sum(p.numel() for p in model.parameters())


def one_step(way: str, k: int, me) -> dict:
    """One optimizer step of k micro-batches of one sequence per rank, metered."""
    torch.manual_seed(0)
    model = GPT(CONFIG).to(me.device)
    optimizer, context, after = build(way, model, me)
    with CommMeter() as meter:
        for m in range(k):
            with context(m, k):
                (next_token_loss(model, rank_batch(CONFIG, 1, m, me)) / k).backward()
        after()
        optimizer.step()
    sent = {op: e["bus_bytes"] / 4 for op, e in meter.summary().items()}
    return {"sent": sent, "reduced": reduced(way, model, optimizer)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--micro", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    me = zb.setup(verbose=False)
    zb.report(
        world_size=me.world_size,
        ways={way: {k: one_step(way, k, me) for k in args.micro} for way in WAYS},
    )


if __name__ == "__main__":
    main()
