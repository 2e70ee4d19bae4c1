"""Collectives that do not match: --mode different (rank 0 all_reduce, others broadcast) or
--mode skip (rank 1 skips the all_reduce and goes on to all_gather)."""

import argparse

import torch
import torch.distributed as dist

import zerobook as zb

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["different", "skip"], default="different")
cli = parser.parse_args()
me = zb.setup()
t = torch.ones(8)
if cli.mode == "different":
    if me.rank == 0:
        dist.all_reduce(t)
    else:
        dist.broadcast(t, src=0)
else:
    if me.rank != 1:
        dist.all_reduce(t)
    out = [torch.empty(8) for _ in range(me.world_size)]
    dist.all_gather(out, t)
zb.report(ok=True)
