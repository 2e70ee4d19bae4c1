"""ZeRO-1: each rank keeps the fp32 master weights and AdamW moments of its shard only.

    optimizer = Zero1AdamW(model.parameters(), lr=1e-3)   # model in bf16 (or fp16)
    loss.backward(); optimizer.step(); optimizer.zero_grad()

A step is three moves (Rajbhandari et al. 2020, P_os):
1. reduce-scatter the flat 16-bit gradients: rank r receives the sum of its shard (numel/N);
2. AdamW on the shard: fp32 master weights, momentum and variance, 12 bytes x numel/N;
3. all-gather the updated 16-bit shards back into every rank's flat parameters.
Traffic per rank: (N-1)/N of the buffer for each collective, 2Ψ(N-1)/N elements, as DDP.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from zerobook.measure import optimizer_tensors
from zerobook.precision import param_groups
from zerobook.zero.flat import FlatParams


def reduce_scatter_grads(flat: FlatParams, group=None) -> torch.Tensor:
    """Reduce-scatter (SUM) each bucket of flat gradients; returns this rank's shard (numel/N), averaged."""
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    shard = torch.empty(flat.shard_numel, dtype=flat.flat_grad.dtype, device=flat.flat_grad.device)
    for bucket, (offset, n) in zip(flat.buckets, flat.local_slices()):
        dist.reduce_scatter_tensor(shard[offset:offset + n], flat.bucket_view(flat.flat_grad, bucket),
                                   group=group)
    return shard.div_(world_size)


def all_gather_params(flat: FlatParams, shard: torch.Tensor, group=None) -> None:
    """All-gather every rank's updated shard (numel/N) into the flat parameters, bucket by bucket."""
    for bucket, (offset, n) in zip(flat.buckets, flat.local_slices()):
        dist.all_gather_into_tensor(flat.bucket_view(flat.flat, bucket), shard[offset:offset + n],
                                    group=group)


def clip_shards_(grad: torch.Tensor, max_norm: float, group=None) -> torch.Tensor:
    """Scale this rank's gradient shard so that the *global* L2 norm is at most `max_norm`.

    Squares summed over the shard, one all-reduce (SUM) of that fp32 scalar, square root: every
    rank gets the same norm and the same scale. Returns the norm before clipping.
    """
    squares = grad.pow(2).sum()
    dist.all_reduce(squares, group=group)
    norm = squares.sqrt()
    grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


def step_pieces(inner: torch.optim.Optimizer, pieces: list) -> None:
    """AdamW on the fp32 shard's pieces, then drop their gradients (only needed for the step)."""
    inner.step()
    for piece in pieces:
        piece.grad = None


class Zero1AdamW:
    """Mixed-precision AdamW with its fp32 state sharded across the data-parallel ranks.

    `params` as torch.optim takes them: tensors, or groups {"params": [...], "lr": ..,
    "weight_decay": ..}. Frozen parameters (requires_grad=False) stay out of the flat buffer; a tied
    parameter is held once. Each rank's shard is cut into runs by group, and each run is one fp32
    tensor in its group of the inner AdamW (views of one contiguous fp32 shard).
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, group=None):
        self.group, self.rank = group, dist.get_rank(group)
        groups = param_groups(params)
        self.flat = self.make_flat([p for g in groups for p in g["params"]], dist.get_world_size(group))
        self.master = self.flat.shard(self.flat.flat, self.rank).float()  # fp32, numel/N
        self.master_grad = None  # fp32 gradient shard, only between backward and step
        self.inner = torch.optim.AdamW(self._shard_groups(groups), lr=lr, betas=betas, eps=eps,
                                       weight_decay=weight_decay)

    def _shard_groups(self, groups: list[dict]) -> list[dict]:
        """The inner AdamW's groups: each run of this rank's shard, with its group's options."""
        labels = [index for index, g in enumerate(groups) for _ in g["params"]]
        self.runs = self.flat.shard_segments(self.rank, labels)
        out = [{**g, "params": []} for g in groups]
        self.pieces = [torch.nn.Parameter(self.master[a:b]) for a, b, _ in self.runs]  # views
        for piece, (_, _, label) in zip(self.pieces, self.runs):
            out[label]["params"].append(piece)
        return [g for g in out if g["params"]]

    def make_flat(self, params, world_size: int) -> FlatParams:
        """Stage 1: one bucket, and a full flat gradient buffer that backward fills."""
        return FlatParams(params, world_size)

    def shard_grads(self) -> torch.Tensor:
        """This rank's averaged gradient shard (numel/N): stage 1 reduce-scatters it now."""
        return reduce_scatter_grads(self.flat, self.group)

    @torch.no_grad()
    def reduced_grad(self) -> torch.Tensor:
        """This rank's averaged fp32 gradient shard (numel/N), reduced once per step."""
        if self.master_grad is None:
            self.master_grad = self.shard_grads().float()
            for piece, (start, stop, _) in zip(self.pieces, self.runs):
                piece.grad = self.master_grad[start:stop]
        return self.master_grad

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Scale the gradients so that their global L2 norm is at most `max_norm`; return the norm.

        No rank holds the whole gradient: each sums the squares of its shard, and an all-reduce
        (SUM) of that one fp32 scalar gives every rank the same ||g||^2. A norm of the shard alone
        would give each rank its own scale, and the update would no longer be a clipped gradient.
        """
        return clip_shards_(self.reduced_grad(), max_norm, self.group)

    @torch.no_grad()
    def step(self) -> None:
        """Reduce-scatter grads, AdamW on this rank's fp32 shard, all-gather the weights."""
        self.reduced_grad()
        step_pieces(self.inner, self.pieces)
        self.master_grad = None
        all_gather_params(self.flat, self.master.to(self.flat.flat.dtype), self.group)

    def zero_grad(self, set_to_none: bool = False) -> None:
        self.flat.zero_grad()

    def state_tensors(self):
        """What this rank keeps for the optimizer: its fp32 shard and AdamW's state of it."""
        yield self.master
        yield from optimizer_tensors(self.inner)
