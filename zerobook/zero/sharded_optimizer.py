"""ZeRO-1 over any torch.optim optimizer, in the manner of ZeroRedundancyOptimizer.

    optimizer = ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-3)

Whole parameters are dealt out to the ranks (group by group, largest first, each to the
least-loaded rank). Each rank builds `optimizer_cls` over its own parameters only, so it holds that
optimizer's state for about 1/N of the model. The gradients must already be averaged (DDP's all-reduce, for instance);
after the local step every parameter is broadcast from the rank that owns it.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from zerobook.measure import optimizer_tensors
from zerobook.precision import param_groups, zero_grads


def partition(groups: list[dict], world_size: int) -> list[list[torch.nn.Parameter]]:
    """Deal parameters to ranks group by group, largest first within a group, each to the rank
    holding the fewest elements so far (ZeroRedundancyOptimizer's `_partition_parameters`)."""
    owned, load = [[] for _ in range(world_size)], [0] * world_size
    for group in groups:
        for p in sorted(group["params"], key=lambda p: p.numel(), reverse=True):
            rank = load.index(min(load))
            owned[rank].append(p)
            load[rank] += p.numel()
    return owned


class ShardedOptimizer:
    """Each rank steps `optimizer_cls` on its partition, then broadcasts what it updated."""

    def __init__(self, params, optimizer_cls, group=None, **kwargs):
        self.group = group
        groups = param_groups(params)
        self.params = [p for g in groups for p in g["params"]]
        self.owned = partition(groups, dist.get_world_size(group))
        self.rank = dist.get_rank(group)
        mine = {id(p) for p in self.owned[self.rank]}
        local = [{**g, "params": [p for p in g["params"] if id(p) in mine]} for g in groups]
        local = [g for g in local if g["params"]]
        self.inner = optimizer_cls(local, **kwargs) if local else None

    @torch.no_grad()
    def step(self) -> None:
        """Local step on this rank's parameters, then one broadcast per parameter from its owner."""
        if self.inner is not None:
            self.inner.step()
        for owner, params in enumerate(self.owned):
            source = dist.get_global_rank(self.group, owner) if self.group else owner
            for p in params:
                dist.broadcast(p, src=source, group=self.group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads(self.params, set_to_none)

    def state_tensors(self):
        """The optimizer state this rank holds (for its own parameters only)."""
        if self.inner is not None:
            yield from optimizer_tensors(self.inner)
