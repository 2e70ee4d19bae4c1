"""One ring all-reduce, traced: which chunk every rank holds after every step, and bytes sent.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.ring_trace

Rank r contributes 2**r in every element, so the value of a chunk after a step says exactly
which ranks' contributions it holds (bit k set: rank k's). The same data then goes through a
parameter server (all to rank 0 and back) for comparison. Each rank reports its trace and the
bytes the traffic meter saw it send and receive. Last, the ring's reduce-scatter against
`dist.reduce_scatter_tensor` on data whose chunk c holds (c + 1) * 2**r: which chunk of the
sum each leaves on rank r, and the ring's with its list of chunks rotated by one.
"""

import argparse

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.collectives import (
    chunks,
    parameter_server_all_reduce,
    ring_all_reduce,
    ring_reduce_scatter,
)
from zerobook.data_parallel.comm import CommMeter


def owned_chunks(me: zb.Rank, elements_per_rank: int) -> dict:
    """Which chunk of the sum rank r ends with: the ring's reduce-scatter, the same ring
    over the chunk list rotated by one, and `dist.reduce_scatter_tensor` (chunk c of rank
    r's input holds (c + 1) * 2**r, so a complete chunk c sums to (c + 1) * (2**N - 1))."""
    n = me.world_size
    chunk_ids = torch.arange(n, device=me.device).repeat_interleave(elements_per_rank)
    data = (chunk_ids + 1.0) * 2**me.rank
    ring = chunks(data.clone(), n)
    ring_index = ring_reduce_scatter(ring)
    rotated = chunks(data.clone(), n)
    ring_reduce_scatter([rotated[(j - 1) % n] for j in range(n)])  # its j: chunk j-1
    library = torch.empty(elements_per_rank, device=me.device)
    dist.reduce_scatter_tensor(library, data)

    def which(part):  # the complete chunk c, or None
        c = part[0].item() / (2**n - 1) - 1
        return int(c) if c.is_integer() and torch.all(part == part[0]) else None

    return {
        "ring": which(ring[ring_index]),
        "rotated": which(rotated[me.rank]),
        "reduce_scatter_tensor": which(library),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements-per-rank", type=int, default=1024)
    cli = parser.parse_args()
    me = zb.setup()
    ours = torch.full(
        (cli.elements_per_rank * me.world_size,), float(2**me.rank), device=me.device
    )
    expected = ours.clone()
    dist.all_reduce(expected)
    trace = []
    with CommMeter() as ring_meter:
        ring_all_reduce(ours, trace=trace)
    server_copy = torch.full_like(ours, float(2**me.rank))
    with CommMeter() as server_meter:
        parameter_server_all_reduce(server_copy)
    zb.report(
        trace=trace,
        equal=torch.equal(ours, expected) and torch.equal(server_copy, expected),
        size_bytes=ours.numel() * ours.element_size(),
        ring_sent=ring_meter.bytes_sent(),
        ring_received=ring_meter.bytes_received(),
        server_sent=server_meter.bytes_sent(),
        server_received=server_meter.bytes_received(),
    )
    zb.report(owned=owned_chunks(me, cli.elements_per_rank))


if __name__ == "__main__":
    main()
