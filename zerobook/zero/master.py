"""The fp32 side every ZeRO stage shares: this rank's master shard and the optimizer over it.

A rank's shard of the flat parameters is cut into runs, one per parameter group it meets
(`FlatParams.shard_segments`); each run is an fp32 tensor — a view of one contiguous master shard —
in its group of an inner optimizer (`torch.optim.AdamW` unless the stage is given another
`torch.optim` class), so learning rate and weight decay follow the groups.
The stage supplies `shard_grads()` (this rank's averaged gradient shard) and what to do with the
updated master (all-gather it, or copy it into the 16-bit shards).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from zerobook.train.measure import optimizer_tensors


def clip_shards_(
    grad: torch.Tensor, max_norm: float, group=None, comm_device=None
) -> torch.Tensor:
    """Scale this rank's gradient shard so that the *global* L2 norm is at most `max_norm`.

    Squares summed over the shard, one all-reduce (SUM) of that fp32 scalar, square root: every
    rank gets the same norm and the same scale. Returns the norm before clipping.
    """
    squares = (
        grad.pow(2).sum().to(comm_device or grad.device)
    )  # NCCL reduces device tensors only
    dist.all_reduce(squares, group=group)
    norm = squares.sqrt().to(grad.device)
    grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


class MasterShard:
    """fp32 master shard, AdamW over its runs, and the fp32 gradient shard between backward and step."""

    group = None
    offload = (
        None  # where the fp32 master and AdamW's state live, if not beside the shard
    )

    def build_master(
        self,
        shard: torch.Tensor,
        runs: list,
        groups: list[dict],
        optimizer_class=torch.optim.AdamW,
        **options,
    ) -> None:
        """`shard`: this rank's 16-bit shard; `runs`: (start, stop, group index) covering it;
        `optimizer_class(groups, **options)` steps the master (any torch.optim optimizer: it sees
        one fp32 tensor per run). With `self.offload` set (ZeRO-Offload), the master, its gradient
        and the optimizer's state live on that device — the host's memory — and the step runs there."""
        self.shard_device = shard.device
        master = (
            shard.float() if self.offload is None else shard.to(self.offload).float()
        )
        self.master, self.master_grad, self.runs = master, None, runs
        out = [{**g, "params": []} for g in groups]
        self.pieces = [
            torch.nn.Parameter(self.master[a:b]) for a, b, _ in runs
        ]  # views
        for piece, (_, _, index) in zip(self.pieces, runs):
            out[index]["params"].append(piece)
        self.inner = optimizer_class([g for g in out if g["params"]], **options)

    def shard_grads(self) -> torch.Tensor:
        """This rank's gradient shard, averaged over ranks (the stage's collective)."""
        raise NotImplementedError

    @torch.no_grad()
    def reduced_grad(self) -> torch.Tensor:
        """This rank's averaged fp32 gradient shard, reduced once per step."""
        if self.master_grad is None:
            grad = (
                self.shard_grads()
            )  # 16 bits over the host link when offloaded, then fp32 there
            self.master_grad = (
                grad if self.offload is None else grad.to(self.offload)
            ).float()
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
        return clip_shards_(
            self.reduced_grad(), max_norm, self.group, self.shard_device
        )

    @torch.no_grad()
    def update_master(self) -> None:
        """The optimizer's step on the fp32 shard; the fp32 gradient shard is dropped after it."""
        self.reduced_grad()
        self.inner.step()
        self.master_grad = None
        for piece in self.pieces:
            piece.grad = None

    def state_tensors(self):
        """What this rank keeps for the optimizer: its fp32 shard and AdamW's state of it."""
        yield self.master
        yield from optimizer_tensors(self.inner)
