"""What a graded rank may do to itself and to its peer (zerobook.trust.graded_rank): start a process,
and read its peer's memory; with --rewrite, rank 1 rewrites rank 0's report once rank 0 has
finished (its finish mark written)."""

import json
import os
import sys
import threading
import time
from pathlib import Path

import torch.distributed as dist

import zerobook as zb

me = zb.setup(verbose=False)
try:
    if os.fork() == 0:
        os._exit(0)
    forked = "started"
except PermissionError:
    forked = "refused"
pids = [None] * me.world_size
dist.all_gather_object(pids, os.getpid())
try:
    with open(f"/proc/{pids[1 - me.rank]}/mem", "rb"):
        peer = "opened"
except PermissionError:
    peer = "refused"
thread = threading.Thread(target=lambda: None)
thread.start()
thread.join()  # threads still work
zb.report(forked=forked, peer_memory=peer, rank=me.rank)
if "--rewrite" in sys.argv and me.rank == 1:
    folder = Path(os.environ["ZEROBOOK_REPORT_DIR"])
    while not (folder / "rank0.done").exists():
        time.sleep(0.02)
    (folder / "rank0.json").write_text(json.dumps({"forked": "never", "rank": 0}))
