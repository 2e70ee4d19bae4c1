"""Rank --rank raises after one good collective; the others go on into the next collective."""

import argparse

import torch
import torch.distributed as dist

import zerobook as zb

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int, default=1)
cli = parser.parse_args()
me = zb.setup()
t = torch.ones(3)
dist.all_reduce(t)
if me.rank == cli.rank:
    raise ValueError(f"planted failure on rank {me.rank}")
dist.all_reduce(t)  # the others wait here for the rank that died
zb.report(ok=True)
