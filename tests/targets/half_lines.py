"""Rank 0 prints half a line, waits while the others print theirs, then ends it: torchrun's --tee
reads whatever a rank's log file holds, so half a line written alone reaches the notebook with a
peer's line after it (zerobook.launcher.rank_entry.whole_lines keeps the half until its end)."""

import time

import torch.distributed as dist

import zerobook as zb

me = zb.setup()
if me.rank == 0:
    print("rank 0 begins a line", end="")
    time.sleep(0.5)  # torchrun's tee reads the ranks' files every 0.1 s
dist.barrier()
if me.rank:
    print(f"rank {me.rank} prints a whole line")
dist.barrier()
if me.rank == 0:
    time.sleep(0.3)
    print(" and ends it")
zb.report(ok=True)
