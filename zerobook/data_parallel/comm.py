"""Bytes on the wire: a meter that records every collective and send/receive a rank makes.

    with CommMeter() as meter:
        ring_all_reduce(t)            # unchanged code: the meter wraps torch.distributed's calls
    meter.bytes_sent()                # what this rank really sent, point to point

Point-to-point calls are counted exactly (bytes of each tensor sent or received, and the peer).
Built-in collectives hide their algorithm, so they are reported the way nccl-tests does: the
algorithm bytes S (the buffer size) and the bus bytes S x factor, labelled as such; factor is
2(N-1)/N for all-reduce, (N-1)/N for reduce-scatter and all-gather, 1 for broadcast and reduce.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from zerobook.accounting.traffic import BUS_FACTORS

POINT_TO_POINT = {
    "send": "sent",
    "isend": "sent",
    "recv": "received",
    "irecv": "received",
}
# name -> (position and name of the argument whose size is S, bus factor as a function of N)
COLLECTIVES = {
    "all_reduce": (0, "tensor", BUS_FACTORS["all_reduce"]),
    "reduce_scatter_tensor": (
        1,
        "input",
        BUS_FACTORS["reduce_scatter"],
    ),  # S: the input, N shards
    "reduce_scatter_single": (1, "input", BUS_FACTORS["reduce_scatter"]),
    "all_gather_into_tensor": (
        0,
        "output_tensor",
        BUS_FACTORS["all_gather"],
    ),  # S: the output
    "all_gather_single": (0, "output_tensor", BUS_FACTORS["all_gather"]),
    "broadcast": (0, "tensor", BUS_FACTORS["broadcast"]),
    "reduce": (0, "tensor", BUS_FACTORS["reduce"]),
    "all_to_all_single": (1, "input", BUS_FACTORS["all_to_all"]),  # S: the input
}
# torch 2.13's new spellings (FSDP2 calls them) are recorded under the names they replace
SAME_AS = {
    "reduce_scatter_single": "reduce_scatter_tensor",
    "all_gather_single": "all_gather_into_tensor",
}


@dataclass
class Event:
    """One call: its name, bytes (moved by this rank, or S for a collective), peer, seconds."""

    op: str
    bytes: int
    peer: int | None = None
    world_size: int = 1
    bus_bytes: float | None = None  # collectives only: nccl-tests' bus bytes
    seconds: float = 0.0
    ranks: tuple | None = None  # the group's global ranks (None: every rank)


def tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


@dataclass
class CommMeter:
    """Context manager: while active, every torch.distributed call of this process is recorded."""

    events: list = field(default_factory=list)
    _saved: dict = field(default_factory=dict, repr=False)
    _depth: int = 0  # torch's send is built on isend: count the outer call only

    def __enter__(self) -> "CommMeter":
        for name in [*POINT_TO_POINT, *COLLECTIVES, "batch_isend_irecv"]:
            original = getattr(c10d, name, None)
            if original is not None:
                self._saved[name] = original
                self._install(name, self._wrap(name, original))
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self._saved.items():
            self._install(name, original)
        self._saved.clear()

    @staticmethod
    def _install(name: str, function) -> None:
        """Both spellings: dist.NAME and the module the P2POp checks look in."""
        setattr(c10d, name, function)
        setattr(dist, name, function)

    def _wrap(self, name: str, original):
        if name == "batch_isend_irecv":
            return self._wrap_batch(original)
        record = self._record_p2p if name in POINT_TO_POINT else self._record_collective

        def metered(*args, **kwargs):
            if self._depth:
                return original(*args, **kwargs)
            self._depth += 1
            start = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            finally:
                self._depth -= 1
            record(name, args, kwargs, time.perf_counter() - start)
            return result

        metered.__name__ = name
        return metered

    def _wrap_batch(self, original):
        def metered_batch(p2p_op_list):
            for (
                op
            ) in p2p_op_list:  # ops built before the meter started hold the originals
                op.op = getattr(c10d, op.op.__name__)
            return original(p2p_op_list)

        return metered_batch

    def _record_p2p(self, name, args, kwargs, seconds) -> None:
        tensor = args[0] if args else kwargs["tensor"]
        peer = (
            args[1]
            if len(args) > 1
            else kwargs.get(
                "dst",
                kwargs.get("src", kwargs.get("group_dst", kwargs.get("group_src"))),
            )
        )
        self.events.append(
            Event(
                name, tensor_bytes(tensor), peer, dist.get_world_size(), None, seconds
            )
        )

    def _record_collective(self, name, args, kwargs, seconds) -> None:
        index, keyword, factor = COLLECTIVES[name]
        tensor = (
            args[index] if len(args) > index else kwargs[keyword]
        )  # FSDP2 passes keywords
        group = kwargs.get("group")
        n = dist.get_world_size(group)
        ranks = (
            None
            if group is None or n == dist.get_world_size()
            else tuple(dist.get_process_group_ranks(group))
        )
        size = tensor_bytes(tensor)
        self.events.append(
            Event(
                SAME_AS.get(name, name), size, None, n, size * factor(n), seconds, ranks
            )
        )

    def bytes_sent(self) -> int:
        """Bytes this rank sent point to point (send and isend, inside batches too)."""
        return sum(e.bytes for e in self.events if POINT_TO_POINT.get(e.op) == "sent")

    def bytes_received(self) -> int:
        return sum(
            e.bytes for e in self.events if POINT_TO_POINT.get(e.op) == "received"
        )

    def bus_bytes(self) -> float:
        """nccl-tests' bus bytes of the built-in collectives recorded (what a ring would send)."""
        return sum(e.bus_bytes for e in self.events if e.bus_bytes is not None)

    def summary(self, by_group: bool = False) -> dict:
        """JSON-able totals by operation: calls and bytes (sent, received, or S and bus bytes);
        by_group: by operation and group ("all_reduce over (0, 2)"), to tell links apart."""
        out: dict = {}
        for e in self.events:
            key = f"{e.op} over {e.ranks}" if by_group and e.ranks is not None else e.op
            entry = out.setdefault(key, {"calls": 0, "bytes": 0})
            entry["calls"] += 1
            entry["bytes"] += e.bytes
            if e.bus_bytes is not None:
                entry["bus_bytes"] = entry.get("bus_bytes", 0.0) + e.bus_bytes
        return out
