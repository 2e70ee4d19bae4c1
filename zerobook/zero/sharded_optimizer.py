"""ZeRO-1 over any torch.optim optimizer, in the manner of ZeroRedundancyOptimizer.

    optimizer = ShardedOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)   # any scheduler
    optimizer.consolidate_state_dict(to=0)        # every rank: gather the shards' states on rank 0
    if rank == 0: torch.save(optimizer.state_dict(), "optimizer.pt")   # a plain optimizer's dict
    optimizer.load_state_dict(torch.load("optimizer.pt"))             # every rank takes its part

Whole parameters are dealt out to the ranks (group by group, largest first, each to the
least-loaded rank). Each rank builds `optimizer_class` over its own parameters only, so it holds
that optimizer's state for about 1/N of the model. It is a `torch.optim.Optimizer`: `param_groups`
lists every parameter (what LR schedulers change), and each step copies the groups'
hyperparameters into the rank's own optimizer first. The gradients must already be averaged
(DDP's all-reduce, for instance); after the local step every parameter is broadcast from the rank
that owns it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from zerobook.train.measure import optimizer_tensors
from zerobook.train.precision import param_groups


def partition(groups: list[dict], world_size: int) -> list[list[torch.nn.Parameter]]:
    """Deal parameters to ranks group by group, largest first within a group, each to the rank
    holding the fewest elements so far (ZeroRedundancyOptimizer's `_partition_parameters`)."""
    owned, load = [[] for _ in range(world_size)], [0] * world_size
    for group in groups:
        deal(group["params"], owned, load)
    return owned


def deal(params: list, owned: list[list], load: list[int]) -> None:
    """Give each of `params`, largest first, to the least-loaded rank (owned and load updated)."""
    for p in sorted(params, key=lambda p: p.numel(), reverse=True):
        rank = load.index(min(load))
        owned[rank].append(p)
        load[rank] += p.numel()


def full_defaults(optimizer_class, defaults: dict) -> dict:
    """Every hyperparameter `optimizer_class` has, with `defaults` applied (what its state_dict
    lists for each group), read off a throwaway instance."""
    return dict(
        optimizer_class([torch.nn.Parameter(torch.zeros(1))], **defaults).defaults
    )


class ShardedOptimizer(torch.optim.Optimizer):
    """Each rank steps `optimizer_class` on its partition, then broadcasts what it updated."""

    def __init__(self, params, optimizer_class, group=None, **defaults):
        self.process_group, self.optimizer_class = group, optimizer_class
        self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        self.owned: list[list] = [[] for _ in range(self.world_size)]
        self.load = [0] * self.world_size
        self.local, self.local_group = (
            None,
            {},
        )  # this rank's optimizer; global -> its group index
        self.consolidated = None
        super().__init__(param_groups(params), full_defaults(optimizer_class, defaults))

    def add_param_group(self, param_group: dict) -> None:
        """A new group (as torch.optim takes it): dealt out after the groups already here, so no
        parameter changes owner; this rank's share joins its own optimizer."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        before = [len(o) for o in self.owned]
        deal(group["params"], self.owned, self.load)
        mine = self.owned[self.rank][before[self.rank] :]
        if mine:
            local = {**group, "params": mine}
            if self.local is None:
                self.local = self.optimizer_class([local])
            else:
                self.local.add_param_group(local)
            self.local_group[len(self.param_groups) - 1] = (
                len(self.local.param_groups) - 1
            )

    def sync_hyperparameters(self) -> None:
        """Copy each group's hyperparameters (lr, weight decay, ...: what a scheduler changes)
        into this rank's own optimizer."""
        for index, local in self.local_group.items():
            self.local.param_groups[local].update(
                {k: v for k, v in self.param_groups[index].items() if k != "params"}
            )

    def step(self, closure=None):
        """Local step on this rank's parameters, then one broadcast per parameter from its owner.
        With `closure`, it is called first (with gradients enabled) and its loss returned."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.sync_hyperparameters()
        with torch.no_grad():
            if self.local is not None:
                self.local.step()
            self.broadcast_owned()
        self.consolidated = None  # any gathered state is stale now
        return loss

    def broadcast_owned(self) -> None:
        """Every parameter from the rank that owns it (one broadcast per tensor)."""
        for owner, params in enumerate(self.owned):
            source = (
                dist.get_global_rank(self.process_group, owner)
                if self.process_group
                else owner
            )
            for p in params:
                dist.broadcast(p, src=source, group=self.process_group)

    def index_of(self) -> dict[int, int]:
        """id(parameter) -> its index in a state dict (the order of param_groups, as torch.optim)."""
        return {
            id(p): i
            for i, p in enumerate(p for g in self.param_groups for p in g["params"])
        }

    def consolidate_state_dict(self, to: int | None = 0) -> None:
        """Gather every rank's optimizer state on rank `to` (None: on every rank); call it on
        every rank. Then `state_dict()` there returns the whole optimizer's."""
        index = self.index_of()
        mine = (
            {}
            if self.local is None
            else {
                index[id(p)]: {
                    k: v.cpu() if torch.is_tensor(v) else v for k, v in state.items()
                }
                for p, state in self.local.state.items()
            }
        )
        parts = [None] * self.world_size
        if to is None:
            dist.all_gather_object(parts, mine, group=self.process_group)
        else:
            dist.gather_object(
                mine,
                parts if self.rank == to else None,
                dst=to,
                group=self.process_group,
            )
        if to is None or self.rank == to:
            self.consolidated = {i: s for part in parts for i, s in part.items()}

    def state_dict(self) -> dict:
        """The whole optimizer's state dict, in torch.optim's format (a plain `optimizer_class`
        over all the parameters can load it), after `consolidate_state_dict` on this rank."""
        if self.consolidated is None:
            raise RuntimeError(
                "ShardedOptimizer.state_dict(): each rank holds only its shard's state; "
                "call consolidate_state_dict(to=RANK) on every rank first, then "
                "state_dict() on RANK"
            )
        index, groups = self.index_of(), []
        for group in self.param_groups:
            groups.append(
                {
                    **{k: v for k, v in group.items() if k != "params"},
                    "params": [index[id(p)] for p in group["params"]],
                }
            )
        return {
            "state": dict(sorted(self.consolidated.items())),
            "param_groups": groups,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Take a whole optimizer's state dict (every rank passes the same one): the groups'
        hyperparameters, and the state of the parameters this rank owns."""
        saved = state_dict["param_groups"]
        if [len(g["params"]) for g in saved] != [
            len(g["params"]) for g in self.param_groups
        ]:
            raise ValueError(
                "the state dict's parameter groups do not match this optimizer's"
            )
        for group, loaded in zip(self.param_groups, saved):
            group.update({k: v for k, v in loaded.items() if k != "params"})
        if self.local is not None:
            self.local.load_state_dict(self.local_state_dict(state_dict["state"]))
        self.sync_hyperparameters()

    def local_state_dict(self, state: dict) -> dict:
        """The part of a whole state dict that this rank's own optimizer holds, in its numbering."""
        index = self.index_of()
        local_params = [p for g in self.local.param_groups for p in g["params"]]
        local_state = {
            i: state[index[id(p)]]
            for i, p in enumerate(local_params)
            if index[id(p)] in state
        }
        groups, start = [], 0
        for group in self.local.param_groups:
            groups.append(
                {
                    **{k: v for k, v in group.items() if k != "params"},
                    "params": list(range(start, start + len(group["params"]))),
                }
            )
            start += len(group["params"])
        return {"state": local_state, "param_groups": groups}

    def state_tensors(self):
        """The optimizer state this rank holds (for its own parameters only)."""
        if self.local is not None:
            yield from optimizer_tensors(self.local)
