"""Hello from every rank: each contributes rank+1, all-reduce (SUM), and report what it saw.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.hello

Also runs as a plain script (world size 1): `python -m zerobook.runs.hello`.
`--fail-rank R` makes rank R raise after the all-reduce, to show how a failure comes back.
"""

import argparse
import socket

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.launcher.dist import env_int


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--fail-rank", type=int, default=None, help="this rank raises on purpose"
    )
    cli = parser.parse_args()
    me = zb.setup()
    contribution = torch.tensor([me.rank + 1.0], device=me.device)
    total = contribution.clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)  # every rank ends with 1 + 2 + ... + N
    print(f"contributed {contribution.item():.0f}, all-reduce gave {total.item():.0f}")
    if me.rank == cli.fail_rank:
        raise RuntimeError(
            f"rank {me.rank} fails on purpose (--fail-rank {cli.fail_rank})"
        )
    dist.barrier()  # the other ranks wait here, as they would in the next collective
    zb.report(
        rank=me.rank,
        world_size=me.world_size,
        backend=me.backend,
        device=me.device,
        host=socket.gethostname(),
        contribution=contribution.item(),
        total=total.item(),
        local_rank=me.local_rank,
        group_rank=env_int("GROUP_RANK", 0),  # this node's, from the rendezvous
    )


if __name__ == "__main__":
    main()
