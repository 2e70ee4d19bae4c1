"""Time all-reduce for a range of sizes: our ring and the backend's built-in, on every rank (and,
with `--impls`, the built-in reduce-scatter and all-gather).

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.bandwidth --max-bytes 67108864

Rank 0 reports, for each size S (bytes, fp32) and implementation, the median seconds of one
collective over a few timed repetitions (after one warm-up). S is nccl-tests' size: all-reduce's
buffer, reduce-scatter's input, all-gather's output (each rank holds S/N of the last two's other side). Ranks start each repetition together
(a barrier), so the time is that of the slowest rank, as nccl-tests measures it.
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.collectives import ring_all_reduce

IMPLEMENTATIONS = {
    "ring": ring_all_reduce,
    "builtin": dist.all_reduce,
}  # what an all-reduce of S runs


def shard_collective(name: str, tensor: torch.Tensor):
    """fn(tensor) for a built-in collective of S = tensor's bytes: "reduce_scatter" (S in, S/N out)
    or "all_gather" (S/N in, S out), with this rank's S/N buffer made once."""
    part = torch.empty(
        tensor.numel() // dist.get_world_size(),
        dtype=tensor.dtype,
        device=tensor.device,
    )
    if name == "reduce_scatter":
        return lambda t: dist.reduce_scatter_tensor(part, t)
    return lambda t: dist.all_gather_into_tensor(t, part)


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of four from min_bytes to max_bytes."""
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= 4
    return out


def time_one(function, tensor: torch.Tensor, repeats: int) -> float:
    """Median seconds of `function(tensor)` over `repeats` runs, after one warm-up run."""
    function(tensor)
    samples = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        function(tensor)
        if tensor.is_cuda:
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - start)
    seconds = torch.tensor(
        [statistics.median(samples)], dtype=torch.float64, device=tensor.device
    )
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # the slowest rank's time
    return seconds.item()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-bytes", type=int, default=1024)
    parser.add_argument("--max-bytes", type=int, default=64 * 2**20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--impls",
        default="ring,builtin",
        help="of ring, builtin, reduce_scatter, all_gather",
    )
    cli = parser.parse_args()
    me = zb.setup()
    rows = []
    for size in sizes(cli.min_bytes, cli.max_bytes):
        tensor = torch.ones(size // 4, device=me.device)
        for name in cli.impls.split(","):
            function = IMPLEMENTATIONS.get(name) or shard_collective(name, tensor)
            rows.append(
                {
                    "impl": name,
                    "bytes": size,
                    "seconds": time_one(function, tensor, cli.repeats),
                }
            )
    if me.is_main:
        zb.report(rows=rows, world_size=me.world_size, backend=me.backend)


if __name__ == "__main__":
    main()
