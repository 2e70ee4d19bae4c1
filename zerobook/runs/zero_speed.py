"""Step time of ZeRO-1/2 from scratch against DDP and ZeroRedundancyOptimizer, on every rank.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.zero_speed --rounds 5

One step = forward, backward, gradient reduction, AdamW, in fp32 for every method (the
same math as ZeroRedundancyOptimizer, which has no mixed precision of its own). The methods take
turns, `--steps` timed steps each per round, so a slow spell of a shared machine hits all of them;
each rank reports every method's median seconds per step (rank 0's view is what the benchmark
prints). Methods: torch DDP + AdamW; DDP + ZeroRedundancyOptimizer; our stage 1; our stage 2 with
up to 2 reduce-scatters in flight during backward ("overlap"); our stage 2 waiting for each one
before backward goes on ("no overlap").
"""

import argparse
import statistics

import torch
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

import zerobook as zb
from zerobook.train.models import GPT, GPTConfig, random_batch
from zerobook.train.training import timed_steps
from zerobook.zero import Zero1AdamW, Zero2AdamW

METHODS = ["ddp", "zero_ro", "zero1", "zero2_overlap", "zero2_no_overlap"]
BUCKET_NUMEL = (
    2**18
)  # 1 MiB of fp32, torch DDP's first-bucket size (the performance model's ZERO2_BUCKET_NUMEL)


def build(method: str, config: GPTConfig, device: str):
    """(model to call, optimizer) for one method, from the same seed."""
    torch.manual_seed(0)
    model = GPT(config).to(device)
    if method in ("ddp", "zero_ro"):
        wrapped = DistributedDataParallel(model)
        if method == "ddp":
            return wrapped, torch.optim.AdamW(model.parameters(), lr=1e-4)
        return wrapped, ZeroRedundancyOptimizer(
            model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4
        )
    if method == "zero1":
        return model, Zero1AdamW(model.parameters(), lr=1e-4)
    in_flight = 2 if method == "zero2_overlap" else 0  # 0: wait for each bucket at once
    return model, Zero2AdamW(
        model.parameters(), lr=1e-4, bucket_numel=BUCKET_NUMEL, max_in_flight=in_flight
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4, help="sequences per rank")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    cli = parser.parse_args()
    me = zb.setup()
    config = GPTConfig(
        vocab=4096, hidden=cli.hidden, layers=cli.layers, heads=4, seq_len=128
    )
    built = {m: build(m, config, me.device) for m in METHODS}
    batch = random_batch(config, cli.batch, seed=me.rank).to(me.device)
    seconds = {m: [] for m in METHODS}
    for m in METHODS:
        timed_steps(*built[m], batch, 1)  # warm-up: buckets, optimizer state
    for _ in range(cli.rounds):
        for m in METHODS:
            seconds[m] += timed_steps(*built[m], batch, cli.steps)
    zb.report(
        median={m: statistics.median(s) for m, s in seconds.items()},
        num_params=sum(p.numel() for p in built["zero1"][0].parameters()),
        backend=me.backend,
        device=me.device,
    )


if __name__ == "__main__":
    main()
