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

from zerobook.train.precision import param_groups
from zerobook.zero.flat import FlatParams
from zerobook.zero.master import MasterShard


def reduce_scatter_grads(flat: FlatParams, group=None) -> torch.Tensor:
    """Reduce-scatter (SUM) each bucket of flat gradients; returns this rank's shard (numel/N), averaged."""
    world_size = dist.get_world_size(group)
    shard = torch.empty(
        flat.shard_numel, dtype=flat.flat_grad.dtype, device=flat.flat_grad.device
    )
    for bucket, (offset, n) in zip(flat.buckets, flat.local_slices()):
        dist.reduce_scatter_tensor(
            shard[offset : offset + n],
            flat.bucket_view(flat.flat_grad, bucket),
            group=group,
        )
    return shard.div_(world_size)


def all_gather_params(flat: FlatParams, shard: torch.Tensor, group=None) -> None:
    """All-gather every rank's updated shard (numel/N) into the flat parameters, bucket by bucket."""
    for bucket, (offset, n) in zip(flat.buckets, flat.local_slices()):
        dist.all_gather_into_tensor(
            flat.bucket_view(flat.flat, bucket), shard[offset : offset + n], group=group
        )


class Zero1AdamW(MasterShard):
    """Mixed-precision AdamW with its fp32 state sharded across the data-parallel ranks.

    `params` as torch.optim takes them: tensors, or groups {"params": [...], "lr": ..,
    "weight_decay": ..}. Frozen parameters (requires_grad=False) stay out of the flat buffer; a tied
    parameter is held once. Each rank's shard is cut into runs by group (`MasterShard`).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        group=None,
    ):
        self.group, self.rank = group, dist.get_rank(group)
        groups = param_groups(params)
        self.flat = self.make_flat(
            [p for g in groups for p in g["params"]], dist.get_world_size(group)
        )
        labels = [index for index, g in enumerate(groups) for _ in g["params"]]
        self.build_master(
            self.flat.shard(self.flat.flat, self.rank),
            self.flat.shard_segments(self.rank, labels),
            groups,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
        )

    def make_flat(self, params, world_size: int) -> FlatParams:
        """Stage 1: one bucket, and a full flat gradient buffer that backward fills."""
        return FlatParams(params, world_size)

    def shard_grads(self) -> torch.Tensor:
        """This rank's averaged gradient shard (numel/N): stage 1 reduce-scatters it now."""
        return reduce_scatter_grads(self.flat, self.group)

    @torch.no_grad()
    def step(self) -> None:
        """Reduce-scatter grads, AdamW on this rank's fp32 shard, all-gather the weights."""
        self.update_master()
        all_gather_params(self.flat, self.master.to(self.flat.flat.dtype), self.group)

    def zero_grad(self, set_to_none: bool = False) -> None:
        self.flat.zero_grad()
