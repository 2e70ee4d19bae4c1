"""How two trainings are compared: the same bits where the arithmetic can be the same, and a
derived bound where it cannot.

Floating-point addition is not associative, and every reduction picks its own order: gloo's ring
adds element e of an all-reduce in an order that depends on e's position, the buffer's size and N;
a reduce-scatter of a flat bucket puts the same gradient at another position than an all-reduce of
one parameter; NCCL picks orders by channel. So DDP, ZeRO-1/2/3 and FSDP2, the same mathematics,
end a few ulps apart — and Adam, which divides by sqrt(v), can magnify a few ulps of a gradient
that nearly cancels into a visible difference, by an amount that depends on the data and on the
CPU's kernels. A tolerance tuned on one machine fails on another.

    with ordered_sums():           # every all-reduce and reduce-scatter adds rank 0 + rank 1 + ...
        train(...)                 # DDP, ZeRO, FSDP2: unchanged code

Inside `ordered_sums()`, all_reduce and reduce_scatter (SUM or AVG) all-gather every rank's input
(which copies bits exactly) and add the N parts in rank order, then divide by N for AVG. Two
programs that reduce the same per-rank gradients then get the same bits on any backend and any
CPU, and parity is asserted as equality. For comparisons whose order cannot match (a norm summed
by shards against torch's norm of norms), `norm_bound` gives the bound from the error analysis of
summation (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 4.2).
Enter `ordered_sums()` outside any `CommMeter`, so the meter records the collective asked for.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

_ALL_GATHER = c10d.all_gather_into_tensor  # the real one, never a meter's wrapper
REDUCTIONS = ("all_reduce", "reduce_scatter_tensor", "reduce_scatter_single")


class Done:
    """The handle an `async_op=True` call returns: the work is already done."""

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _parts(tensor: torch.Tensor, group) -> torch.Tensor:
    """Every rank's copy of `tensor`, flattened: shape (N, numel), row r from group rank r."""
    world_size = dist.get_world_size(group)
    parts = torch.empty(
        world_size * tensor.numel(), dtype=tensor.dtype, device=tensor.device
    )
    _ALL_GATHER(parts, tensor.contiguous().reshape(-1), group=group)
    return parts.view(world_size, -1)


def rank_order_sum(parts: torch.Tensor, op=dist.ReduceOp.SUM) -> torch.Tensor:
    """((part 0 + part 1) + part 2) + ...: one rounding per addition, the same on every CPU;
    divided by N for AVG. parts: (N, numel)."""
    if op not in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
        raise NotImplementedError(f"ordered_sums: {op} is not a sum (SUM and AVG are)")
    total = parts[0].clone()
    for part in parts[1:]:
        total += part
    return total.div_(parts.shape[0]) if op == dist.ReduceOp.AVG else total


def ordered_all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
    """all_reduce (SUM or AVG) of `tensor` in place, adding the ranks' copies in rank order."""
    if not tensor.is_floating_point() or op not in (
        dist.ReduceOp.SUM,
        dist.ReduceOp.AVG,
    ):
        return _SAVED["all_reduce"](
            tensor, op=op, group=group, async_op=async_op
        )  # exact anyway
    tensor.copy_(rank_order_sum(_parts(tensor, group), op).view_as(tensor))
    return Done() if async_op else None


def ordered_reduce_scatter(
    output, input, op=dist.ReduceOp.SUM, group=None, async_op=False
):
    """reduce_scatter of `input` (N * output.numel() elements) into `output`, rank order."""
    rank, n = dist.get_rank(group), output.numel()
    mine = _parts(input, group)[:, rank * n : (rank + 1) * n]
    output.copy_(rank_order_sum(mine, op).view_as(output))
    return Done() if async_op else None


_SAVED: dict = {}
_ORDERED = {
    "all_reduce": ordered_all_reduce,
    "reduce_scatter_tensor": ordered_reduce_scatter,
    "reduce_scatter_single": ordered_reduce_scatter,
}


@contextlib.contextmanager
def ordered_sums():
    """While active, torch.distributed's all_reduce and reduce_scatter add in rank order."""
    for name in REDUCTIONS:
        if hasattr(c10d, name):
            _SAVED[name] = getattr(c10d, name)
            setattr(c10d, name, _ORDERED[name])
            setattr(dist, name, _ORDERED[name])
    try:
        yield
    finally:
        for name, original in _SAVED.items():
            setattr(c10d, name, original)
            setattr(dist, name, original)
        _SAVED.clear()


def ordered_comm_hook(group, bucket):
    """A DistributedDataParallel comm hook (`ddp.register_comm_hook(None, ordered_comm_hook)`):
    its C++ reducer calls gloo/NCCL directly, so `ordered_sums` needs this to reach it."""
    buffer = bucket.buffer()
    buffer.copy_(rank_order_sum(_parts(buffer, group), dist.ReduceOp.AVG))
    future = torch.futures.Future()
    future.set_result(buffer)
    return future


def unit_roundoff(dtype=torch.float32) -> float:
    """u = half the gap between 1 and the next number: every operation's relative error <= u."""
    return torch.finfo(dtype).eps / 2


def gamma(k: int, dtype=torch.float32) -> float:
    """Higham's gamma_k = k u / (1 - k u): k roundings compound to at most this relative error."""
    u = unit_roundoff(dtype)
    if k * u >= 1:
        raise ValueError(f"gamma_{k} is unbounded in {dtype} (k u >= 1)")
    return k * u / (1 - k * u)


def norm_bound(numel: int, dtype=torch.float32) -> float:
    """How far two computations of one L2 norm of `numel` numbers may be apart, relatively,
    whatever their orders: |a / b - 1| <= this.

    Each computes sqrt(sum x^2) = exact x (1 + t), |t| <= e: a leaf is squared (1 rounding), goes
    through at most numel - 1 additions of non-negative terms (any tree; an all-reduce's partial
    sums are part of it), and a norm of norms adds a square root and a square on its path (2 more);
    the last square root halves the relative error and adds one rounding. With e = gamma(numel + 3),
    the two results differ by at most (1 + e) / (1 - e) - 1 = 2e / (1 - e)."""
    e = gamma(numel + 3, dtype)
    return 2 * e / (1 - e)
