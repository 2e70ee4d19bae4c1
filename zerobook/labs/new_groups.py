"""dist.new_group watched while a student's code runs: ranks that make different groups, or a
rank that never makes one the others make, fail naming both, instead of hanging.

    with NewGroups(store, rank, world_size, timeout) as made:
        group = call_student(student, "node_group", 2)
    made.calls                  # [(the ranks asked for, use_local_synchronization?), ...]

torch requires every process to enter every dist.new_group, member or not, in the same order
(unless use_local_synchronization=True: then only the members). Ranks that each make only their
own node's group may pass on gloo or hang, by chance. Before each call goes on, every rank
writes the ranks it asks for to the run's store (zerobook.labs.crash.run_store: no collective)
and reads everyone's: they agree, or each rank raises GroupsDiffer.
"""

from __future__ import annotations

import json

import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

WHY = "every rank makes every group, member or not, in the same order"


class GroupsDiffer(RuntimeError):
    """The ranks did not make the same process groups in the same order."""


class NewGroups:
    """Context manager: dist.new_group (both spellings) checked across ranks, each call noted."""

    def __init__(self, store, rank: int, world_size: int, timeout):
        self.store, self.rank, self.world_size, self.timeout = (
            store,
            rank,
            world_size,
            timeout,
        )
        self.calls: list[tuple[list[int], bool]] = []

    def __enter__(self) -> NewGroups:
        self.original = c10d.new_group
        dist.new_group = c10d.new_group = self.new_group
        return self

    def __exit__(self, *exc) -> None:
        dist.new_group = c10d.new_group = self.original

    def new_group(self, ranks=None, *args, **kwargs):
        local = bool(kwargs.get("use_local_synchronization"))
        asked = sorted(ranks) if ranks is not None else list(range(self.world_size))
        self.calls.append((asked, local))
        if not local and self.store is not None:
            self.agree(len(self.calls), asked)
        return self.original(ranks, *args, **kwargs)

    def agree(self, call: int, asked: list[int]) -> None:
        """Every rank's ranks for its call number `call` equal `asked`, or GroupsDiffer."""
        keys = [f"zerobook/new_group/{call}/{r}" for r in range(self.world_size)]
        self.store.set(keys[self.rank], json.dumps(asked))
        try:
            self.store.wait(keys, self.timeout)
        except Exception:  # noqa: BLE001 - a rank that never made this call
            missing = [r for r, key in enumerate(keys) if not self.store.check([key])]
            raise GroupsDiffer(
                f"dist.new_group call {call} (ranks {asked}) was never made by rank(s) "
                f"{missing}: {WHY}"
            ) from None
        for other, key in enumerate(keys):
            theirs = json.loads(self.store.get(key))
            if theirs != asked:
                raise GroupsDiffer(
                    f"dist.new_group call {call}: rank {self.rank} asked for ranks {asked}, "
                    f"rank {other} for {theirs}: {WHY}"
                )
