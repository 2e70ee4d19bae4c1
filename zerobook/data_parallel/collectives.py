"""Ring collectives from point-to-point sends and receives (Patarasuk & Yuan 2009).

A flat tensor of S elements is cut into N chunks (sizes differ by at most one element when N does
not divide S). In every step each rank sends one chunk to its right neighbour and receives one
from its left, both at once (`batch_isend_irecv`), so every link is busy every step:

* ring reduce-scatter, N-1 steps: rank r ends holding the sum of chunk (r + 1) mod N;
* ring all-gather, N-1 steps: every rank ends holding every chunk;
* ring all-reduce = reduce-scatter then all-gather: 2(N-1)/N * S elements sent per rank.

`trace`, a list, receives one record per step: which chunk this rank sent and received, and
the first element of each of its chunks after the step (so a run with one-hot inputs shows which
ranks' contributions every chunk holds).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def chunks(flat: torch.Tensor, world_size: int) -> list[torch.Tensor]:
    """N contiguous views of a 1-D tensor, sizes differing by at most one (no copies)."""
    return list(torch.tensor_split(flat, world_size))


def neighbours(group=None) -> tuple[int, int, int, int]:
    """(rank, world_size, right, left) of this rank on the ring, as global ranks for send/recv."""
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    right = (
        dist.get_global_rank(group, (rank + 1) % world_size)
        if group
        else (rank + 1) % world_size
    )
    left = (
        dist.get_global_rank(group, (rank - 1) % world_size)
        if group
        else (rank - 1) % world_size
    )
    return rank, world_size, right, left


def exchange(
    send: torch.Tensor, recv: torch.Tensor, right: int, left: int, group=None
) -> None:
    """Send `send` to the right neighbour while receiving `recv` from the left; wait for both."""
    ops = [
        dist.P2POp(dist.isend, send, right, group),
        dist.P2POp(dist.irecv, recv, left, group),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def record(
    trace: list | None, phase: str, step: int, sent: int, received: int, parts
) -> None:
    if trace is not None:
        holding = [p[0].item() if p.numel() else None for p in parts]
        trace.append(
            {
                "phase": phase,
                "step": step,
                "sent": sent,
                "received": received,
                "holding": holding,
            }
        )


def ring_reduce_scatter(
    parts: list[torch.Tensor], group=None, trace: list | None = None
) -> int:
    """Sum chunk by chunk around the ring; returns the index of the chunk this rank now owns.

    parts: this rank's N chunks (views of its flat tensor), summed in place; N-1 steps.
    """
    rank, world_size, right, left = neighbours(group)
    incoming = torch.empty_like(parts[0]) if world_size > 1 else None
    for step in range(world_size - 1):
        send_index, recv_index = (
            (rank - step) % world_size,
            (rank - step - 1) % world_size,
        )
        buffer = incoming[: parts[recv_index].numel()]
        exchange(parts[send_index], buffer, right, left, group)
        parts[recv_index].add_(buffer)
        record(trace, "reduce-scatter", step, send_index, recv_index, parts)
    return (rank + 1) % world_size


def ring_all_gather(
    parts: list[torch.Tensor], group=None, trace: list | None = None
) -> None:
    """Pass complete chunks around the ring until every rank has all N; N-1 steps, in place.

    parts: this rank's N chunks; on entry rank r's chunk (r + 1) mod N is complete.
    """
    rank, world_size, right, left = neighbours(group)
    for step in range(world_size - 1):
        send_index, recv_index = (
            (rank + 1 - step) % world_size,
            (rank - step) % world_size,
        )
        exchange(parts[send_index], parts[recv_index], right, left, group)
        record(trace, "all-gather", step, send_index, recv_index, parts)


def ring_all_reduce(
    tensor: torch.Tensor, group=None, trace: list | None = None
) -> torch.Tensor:
    """Sum `tensor` across the ranks in place, as dist.all_reduce(SUM) does; returns it.

    Reduce-scatter then all-gather over N chunks of the flattened tensor: each rank sends
    2(N-1)/N of its bytes, whatever N.
    """
    flat = tensor.view(-1) if tensor.is_contiguous() else tensor.reshape(-1).clone()
    parts = chunks(flat, dist.get_world_size(group))
    ring_reduce_scatter(parts, group, trace)
    ring_all_gather(parts, group, trace)
    if flat.data_ptr() != tensor.data_ptr():
        tensor.copy_(flat.view_as(tensor))
    return tensor


def parameter_server_all_reduce(
    tensor: torch.Tensor, server: int = 0, group=None
) -> torch.Tensor:
    """The centralised alternative, for comparison: every rank sends to `server`, which sums and
    sends the total back. The server's link carries (N-1) * S bytes each way."""
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    if rank == server:
        incoming = torch.empty_like(tensor)
        for peer in range(world_size):
            if peer != server:
                dist.recv(incoming, src=peer, group=group)
                tensor.add_(incoming)
        for peer in range(world_size):
            if peer != server:
                dist.send(tensor, dst=peer, group=group)
    else:
        dist.send(tensor, dst=server, group=group)
        dist.recv(tensor, src=server, group=group)
    return tensor
