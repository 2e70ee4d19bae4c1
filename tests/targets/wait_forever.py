"""Rank 1 never reaches the all_reduce (it sleeps); the others wait for it in the collective."""

import time

import torch
import torch.distributed as dist

import zerobook as zb

me = zb.setup()
if me.rank == 1:
    time.sleep(3600)
dist.all_reduce(torch.ones(4))
