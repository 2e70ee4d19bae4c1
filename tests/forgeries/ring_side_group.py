"""Lab 3 (the second red team's): a built-in all-reduce on a process group of its own, through
the group object's method; dummy exchanges make the bytes right."""

import torch
import torch.distributed as dist

_PAIRS = dist.new_group()


def ring_all_reduce(tensor):
    """Sum `tensor` (contiguous, 1-D) across all ranks, in place, with a ring of
    send/recv."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    parts = list(torch.tensor_split(tensor, world_size))
    scratch = torch.empty_like(parts[0])
    for step in range(2 * (world_size - 1)):
        piece = parts[(rank - step) % world_size]
        ops = [
            dist.P2POp(dist.isend, piece, right),
            dist.P2POp(
                dist.irecv,
                scratch[: parts[(rank - step - 1) % world_size].numel()],
                left,
            ),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
    _PAIRS.allreduce([tensor]).wait()
