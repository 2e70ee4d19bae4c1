"""One ring all-reduce, traced: which chunk every rank holds after every step, and bytes sent.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.ring_trace

Rank r contributes 2**r in every element, so the value of a chunk after a step says exactly
which ranks' contributions it holds (bit k set: rank k's). The same data then goes through a
parameter server (all to rank 0 and back) for comparison. Each rank reports its trace and the
bytes the traffic meter saw it send and receive.
"""
import argparse

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.collectives import parameter_server_all_reduce, ring_all_reduce
from zerobook.comm import CommMeter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements-per-rank", type=int, default=1024)
    cli = parser.parse_args()
    me = zb.setup()
    ours = torch.full((cli.elements_per_rank * me.world_size,), float(2**me.rank), device=me.device)
    expected = ours.clone()
    dist.all_reduce(expected)
    trace = []
    with CommMeter() as ring_meter:
        ring_all_reduce(ours, trace=trace)
    server_copy = torch.full_like(ours, float(2**me.rank))
    with CommMeter() as server_meter:
        parameter_server_all_reduce(server_copy)
    zb.report(trace=trace, equal=torch.equal(ours, expected) and torch.equal(server_copy, expected),
              size_bytes=ours.numel() * ours.element_size(),
              ring_sent=ring_meter.bytes_sent(), ring_received=ring_meter.bytes_received(),
              server_sent=server_meter.bytes_sent(), server_received=server_meter.bytes_received())


if __name__ == "__main__":
    main()
