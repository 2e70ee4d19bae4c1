"""Rank 1 dies of a signal (SIGSEGV), as a crashing extension would: no Python exception."""

import ctypes

import torch
import torch.distributed as dist

import zerobook as zb

me = zb.setup()
dist.all_reduce(torch.ones(2))
if me.rank == 1:
    ctypes.string_at(0)  # reads address 0
dist.all_reduce(torch.ones(2))
