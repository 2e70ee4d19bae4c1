"""What this machine does per second, measured on every rank at once (so that ranks sharing cores
share them as they will in a training run): the inputs of a "this machine" hardware preset for
zerobook.perfmodel.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.calibrate --hidden 256 --layers 4

compute: forward and backward of the course's GPT on `--batch` sequences, without any collective
(FLOP/s from the model's own count, forward x 3); optimizer: one AdamW step over a tensor of
Psi / N elements (seconds per element); communication: all-reduce (SUM) of sizes from 4 KiB to
16 MiB, fitted to the ring's t = 2(N-1) alpha + 2(N-1)/N S beta (zerobook.accounting.traffic), and the
reduce-scatter of the same buffers over the all-reduce (a ring's is half; gloo's is an all-reduce
and a copy: about 1). Each timing is the median of `--repeats`.
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.train.models import GPT, GPTConfig, next_token_loss, random_batch
from zerobook.accounting.traffic import fit_alpha_beta

SIZES = [2**k for k in range(12, 25, 2)]  # bytes: 4 KiB .. 16 MiB


def median_seconds(fn, repeats: int, device: str = "cpu") -> float:
    """Median wall seconds of fn() over `repeats` calls, after one warm-up call (on a GPU, until
    its kernels have finished)."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    fn()
    times = []
    for _ in range(repeats):
        dist.barrier()
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def compute_seconds(config: GPTConfig, batch: int, repeats: int, device: str) -> float:
    model = GPT(config).to(device)
    tokens = random_batch(config, batch, seed=0).to(device)
    return median_seconds(
        lambda: next_token_loss(model, tokens).backward(), repeats, device
    )


def optimizer_seconds(elements: int, repeats: int, device: str) -> float:
    weight = torch.nn.Parameter(torch.zeros(elements, device=device))
    weight.grad = torch.randn(elements, device=device)
    optimizer = torch.optim.AdamW([weight], lr=1e-4)
    return median_seconds(optimizer.step, repeats, device)


def collective_seconds(repeats: int, me: zb.Rank) -> dict:
    """Median seconds of an all-reduce (SUM) of each size in SIZES, and of a reduce-scatter of
    the same buffer (size bytes in, size/N out), on every rank at once."""
    full = {size: torch.ones(size // 4, device=me.device) for size in SIZES}
    shard = {
        size: torch.empty(size // 4 // me.world_size, device=me.device)
        for size in SIZES
    }
    time_all = lambda op: [
        median_seconds(lambda n=size: op(n), repeats, me.device) for size in SIZES
    ]
    return {
        "all_reduce": time_all(lambda n: dist.all_reduce(full[n])),
        "reduce_scatter": time_all(
            lambda n: dist.reduce_scatter_tensor(shard[n], full[n])
        ),
    }


def communication(repeats: int, me: zb.Rank) -> dict:
    """The all-reduce's alpha-beta fit, and the reduce-scatter's time over the all-reduce's at
    the largest sizes (1 MiB and up), median of their ratios."""
    if me.world_size == 1:
        return {
            "all_reduce": {"alpha": 0.0, "beta": 0.0},
            "reduce_scatter_over_all_reduce": None,
        }
    seconds = collective_seconds(repeats, me)
    large = [k for k, size in enumerate(SIZES) if size >= 2**20]
    ratio = statistics.median(
        seconds["reduce_scatter"][k] / seconds["all_reduce"][k] for k in large
    )
    return {
        "all_reduce": fit_alpha_beta(SIZES, seconds["all_reduce"], me.world_size),
        "reduce_scatter_over_all_reduce": ratio,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    cli = parser.parse_args()
    me = zb.setup()
    config = GPTConfig(
        vocab=4096, hidden=cli.hidden, layers=cli.layers, heads=4, seq_len=128
    )
    psi = sum(p.numel() for p in GPT(config).parameters())
    zb.report(
        compute_seconds=compute_seconds(config, cli.batch, cli.repeats, me.device),
        optimizer_seconds={
            n: optimizer_seconds(psi // n, cli.repeats, me.device)
            for n in sorted({1, me.world_size})
        },
        **communication(cli.repeats, me),
        backend=dist.get_backend(),
        num_params=psi,
        world_size=me.world_size,
    )


if __name__ == "__main__":
    main()
