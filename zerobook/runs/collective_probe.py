"""Does this backend run collective OP on this rank's device? One collective, once, then a check.

    ZEROBOOK_BACKEND=gloo ZEROBOOK_DEVICE=cuda python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.collective_probe --op all_gather_into_tensor

`--op` takes a comma-separated list. Where a backend may not move a CUDA tensor, launch one op at
a time: such a backend may abort the process (gloo's send/recv does), and that must not hide the
answers for the others. Rank 0 reports, per op, whether the result is right (every rank
contributes rank + 1 to a buffer of 2N elements).
"""

import argparse

import torch
import torch.distributed as dist

import zerobook as zb

OPS = (
    "all_reduce",
    "broadcast",
    "reduce_scatter_tensor",
    "all_gather_into_tensor",
    "send_recv",
    "barrier",
)


def run(op: str, me: zb.Rank) -> bool:
    """Run `op` on a buffer of 2N elements (each rank's contribution rank + 1); True if right."""
    n = me.world_size
    full = torch.full((2 * n,), float(me.rank + 1), device=me.device)
    part = torch.full((2,), float(me.rank + 1), device=me.device)
    total = n * (n + 1) / 2
    if op == "all_reduce":
        dist.all_reduce(full)
        return bool((full == total).all())
    if op == "broadcast":
        dist.broadcast(full, src=0)
        return bool((full == 1).all())
    if op == "reduce_scatter_tensor":
        dist.reduce_scatter_tensor(part, full)
        return bool((part == total).all())
    if op == "all_gather_into_tensor":
        dist.all_gather_into_tensor(full, part)
        return torch.equal(
            full.cpu(), torch.arange(1, n + 1).repeat_interleave(2).float()
        )
    if op == "send_recv":
        peer = me.rank ^ 1
        if peer < n:
            (dist.send if me.rank % 2 == 0 else dist.recv)(part, peer)
        return (
            bool((part == (me.rank if me.rank % 2 else me.rank + 1)).all())
            if peer < n
            else True
        )
    dist.barrier()
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--op", required=True, help=f"comma-separated, of {', '.join(OPS)}"
    )
    cli = parser.parse_args()
    me = zb.setup(verbose=False)
    right = {}
    for op in cli.op.split(","):
        if op not in OPS:
            raise SystemExit(
                f"collective_probe: unknown op {op!r}; choose from {', '.join(OPS)}"
            )
        right[op] = run(op, me)
        if me.device.startswith("cuda"):
            torch.cuda.synchronize()
    zb.report(right=right, backend=me.backend, device=me.device)


if __name__ == "__main__":
    main()
