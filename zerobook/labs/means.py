"""What each param.grad holds after a data-parallel step, against every rank's gradients:
the DDP lab's verdicts, and the capstone's check that its DDP really averages.

    holds, way = verdicts(model, grads, me)   # grads: each parameter's own gradient, as it
                                              # arrived on this rank (copies)
    holds["blocks.0.attn.weight"]             # "mean", "divided_mean", "sum", "own",
                                              # "own_mean", "none", "other"

Every rank's gradients are all-gathered with the harness's own collective (taken before any
recorder or the student's file could replace it) and summed in rank order, as the runs sum
(zerobook.train.parity.ordered_sums): a mean is recognised bit for bit, either way it is taken,
and so is the mean PyTorch's DDP takes by default ("divided_mean": each rank's gradient
divided by N before the all-reduce sums them, the same mean in other bits).
"""

import types

import torch
import torch.distributed as dist

import zerobook as zb

ALL_GATHER = dist.all_gather_into_tensor  # the harness's own, never a wrapper
MEANS = types.MappingProxyType(
    {"sum / N": lambda total, n: total / n, "sum * (1/N)": lambda t, n: t * (1 / n)}
)
FIRST = ("divided first: / N", "divided first: * (1/N)")  # PyTorch DDP's default


def ordered(parts: torch.Tensor) -> torch.Tensor:
    """The rows of `parts` summed in rank order (as the runs sum)."""
    total = parts[0].clone()
    for part in parts[1:]:
        total += part
    return total


@torch.no_grad()
def rank_gradients(model, grads: dict, me: zb.Rank) -> torch.Tensor:
    """Every rank's gradients as they arrived, flat in parameter order: (N, numel)."""
    mine = torch.cat([grads[name].reshape(-1) for name, _ in model.named_parameters()])
    parts = torch.empty(me.world_size * mine.numel(), device=mine.device)
    ALL_GATHER(parts, mine)
    return parts.view(me.world_size, -1)


def verdict(grad, piece: slice, parts, total, means: dict, rank: int) -> str:
    """What one param.grad holds: "mean", "divided_mean" (the sum of the ranks' gradients
    each divided by N first), "sum", "own", "own_mean" (this rank's own gradient divided
    by N), "none" or "other"."""
    if grad is None:
        return "none"
    grad = grad.reshape(-1)
    if any(
        torch.equal(grad, mean[piece]) for way, mean in means.items() if way in MEANS
    ):
        return "mean"
    if any(
        torch.equal(grad, mean[piece]) for way, mean in means.items() if way in FIRST
    ):
        return "divided_mean"
    if torch.equal(grad, total[piece]):
        return "sum"
    own = parts[rank][piece]
    if torch.equal(grad, own):
        return "own"
    divided = [average(own, len(parts)) for average in MEANS.values()]
    return "own_mean" if any(torch.equal(grad, d) for d in divided) else "other"


@torch.no_grad()
def verdicts(model, grads: dict, me: zb.Rank) -> tuple[dict, str]:
    """What each param.grad holds after finish(), against the ranks' gradients summed in
    rank order; and the mean they hold (sum * (1/N), or "divided first", only if every
    one does)."""
    parts = rank_gradients(model, grads, me)
    total = ordered(parts)
    means = {way: mean(total, me.world_size) for way, mean in MEANS.items()}
    for way, mean in zip(FIRST, MEANS.values()):
        means[way] = ordered(mean(parts, me.world_size))
    out, offset, multiplied, first = {}, 0, True, True
    for name, param in model.named_parameters():
        piece = slice(offset, offset + param.numel())
        offset += param.numel()
        out[name] = verdict(param.grad, piece, parts, total, means, me.rank)
        mean = means["sum * (1/N)"][piece]
        multiplied &= param.grad is not None and torch.equal(
            param.grad.reshape(-1), mean
        )
        first &= out[name] == "divided_mean"
    if first:
        return out, "divided first"
    return out, "sum * (1/N)" if multiplied else "sum / N"
