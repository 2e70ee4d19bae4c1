"""Asynchronous collectives held in flight until waited on; a step's events, in order.

    with ordered_sums(), InFlight() as flight:   # ordered_sums outside: rank-order sums
        flight.note("grad", name)                # the caller's events join the list
        work = dist.all_reduce(bucket, async_op=True)  # code under test, unchanged
        ...                                      # `bucket`: this rank's values still
        work.wait()                              # now it holds the sum

A real asynchronous collective promises its result only after `wait()`: before it, gloo
or NCCL may have written any part of the tensor. Here the tensor keeps this rank's own
values until `wait()` copies the result in, so code that reads a bucket early, divides
before waiting or never waits gets a wrong gradient every time, not now and then. The
sum itself is taken when the all-reduce is called (every rank calls its all-reduces in
one order, as it must), so a run stays deterministic.

For `reduce_scatter_tensor(output, input)` and `all_gather_into_tensor(output, input)`
(ZeRO's collectives), whose output was allocated for the result (often uninitialized: what
it held would differ from run to run), an asynchronous call fills the output with NaN until
`wait()` copies the result in: reading it early, or never waiting, gives NaN every time.
The input is read when the call is made, so an all-gather whose input is a piece of its
own output (FSDP2's in-place layout) works.

Events: [name, i, async_op] for the i-th held collective (name "all_reduce",
"reduce_scatter_tensor" or "all_gather_into_tensor"; a copy of its input in `inputs[i]`,
one numbering for all three), ["wait", i], ["broadcast", numel], [name] for any other
collective. Beside each event, `counts` holds the process group's own count of the collectives
it has run (kept in C++): a lab's harness asks `tampered()` whether the list still agrees with
it (a collective recorded where the count did not move was written by someone else), and each
event leaves the process as it is recorded, to the rank's watcher (zerobook.trust.witness), which the
grader compares the reported `record()` with.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from zerobook.trust import witness

HELD = ("reduce_scatter_tensor", "all_gather_into_tensor")  # (output, input) held
OTHERS = (
    "all_gather", "reduce",
    "all_reduce_coalesced", "send", "isend", "recv", "irecv", "batch_isend_irecv",
)  # fmt: skip


class Handle:
    """A held collective's handle (async_op=True): wait() puts the result in the
    output tensor (an all-reduce's own tensor)."""

    def __init__(self, flight: InFlight, index: int, tensor, result) -> None:
        self.flight, self.index = flight, index
        self.tensor, self.result = tensor, result

    def wait(self, timeout=None) -> bool:
        """Record the wait; copy the result into the tensor (the first time)."""
        self.flight.add(["wait", self.index])
        if self.result is not None:
            self.tensor.copy_(self.result)
            self.result = None
        return True

    def is_completed(self) -> bool:
        return self.result is None

    def get_future(self):
        raise NotImplementedError("this run's collective handles support wait() only")


RECORDED = (
    "all_reduce",
    "broadcast",
    *HELD,
)  # each moves the process group's count by one


def sequence_number(group=None) -> int:
    """The default process group's own count of the collectives it has run; -1 for another
    group's collective (group=-1: one not checked) or where the backend keeps no count."""
    try:
        default = c10d._get_default_group()
        if group is not None and group is not default:
            return -1
        return default._get_sequence_number_for_group()
    except (RuntimeError, AttributeError, ValueError):
        return -1


def every_group_count() -> int:
    """The collectives every process group of this process has run, added up (a group the
    student's code made runs its own: zerobook.labs.ring_allreduce); -1 where unknown."""
    try:
        return sum(g._get_sequence_number_for_group() for g in c10d._world.pg_map)
    except (RuntimeError, AttributeError, ValueError):
        return -1


class InFlight:
    """Context manager: each all-reduce, reduce-scatter and all-gather (into a tensor) of
    this process returns a Handle (async_op=True) or completes at once, and is recorded
    in `events` beside the caller's notes."""

    def __init__(self) -> None:
        self.events: list[list] = []
        self.counts: list[
            int
        ] = []  # the process group's own count of collectives at each event
        self.inputs: list[torch.Tensor] = []
        self.saved: dict = {}
        self.buffers: dict[
            int, int
        ] = {}  # held collective -> its input's storage address

    def __enter__(self) -> InFlight:
        names = ("all_reduce", "broadcast", *HELD, *OTHERS)
        self.saved = {n: getattr(c10d, n) for n in names if hasattr(c10d, n)}
        others = {name: self.recorded(name) for name in OTHERS if name in self.saved}
        held = {name: self.held(name) for name in HELD}
        self.install(
            {"all_reduce": self.all_reduce, "broadcast": self.broadcast} | held | others
        )
        return self

    def __exit__(self, *exc) -> None:
        self.install(self.saved)
        self.saved = {}

    @staticmethod
    def install(functions: dict) -> None:
        for name, function in functions.items():
            setattr(c10d, name, function)
            setattr(dist, name, function)

    def note(self, *event) -> None:
        """Add the caller's own event (a gradient's arrival, a phase) to the list."""
        self.add(list(event))

    def add(self, event: list, group=None) -> None:
        """Append `event`, with the process group's count of the collectives it has run
        (C++'s: Python cannot set it back), for `tampered` to check the list against."""
        self.events.append(event)
        self.counts.append(sequence_number(group))
        witness.send(
            event, self.counts[-1]
        )  # to the rank's watcher, now (zerobook.trust.witness)

    def record(self) -> dict:
        """The raw record, for a report: the grader checks it against the witness's lines."""
        return {"events": self.events, "counts": self.counts}

    def tampered(self) -> str | None:
        """What is wrong with the events, if something other than this record wrote them: a
        count missing, or a collective recorded where the process group's count did not move."""
        if len(self.counts) != len(self.events):
            return f"{len(self.events)} events but {len(self.counts)} counts of collectives"
        last = None
        for i, (event, count) in enumerate(zip(self.events, self.counts)):
            if count < 0:  # another group's, or no count
                continue
            if last is not None and (
                count < last or (event[0] in RECORDED and count == last)
            ):
                return f"event {i} ({event[0]}) is not where the process group ran it"
            last = count
        return None

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        """all_reduce of `tensor` (any shape), summed now; the sum lands in `tensor` at
        once (async_op=False) or at the returned Handle's wait() (async_op=True)."""
        index = len(self.inputs)
        self.inputs.append(tensor.detach().clone())
        result = tensor.detach().clone()
        self.saved["all_reduce"](result, op=op, group=group)
        self.add(["all_reduce", index, bool(async_op)], group)
        if not async_op:
            tensor.copy_(result)
            return None
        return Handle(self, index, tensor, result)

    def held(self, name: str):
        """`name(output, input, ...)` (a reduce-scatter or all-gather into a tensor),
        done now into a copy; the result lands in `output` at once (async_op=False) or
        at the returned Handle's wait()."""
        original = self.saved[name]

        def call(output, input, *args, async_op=False, **kwargs):
            index = len(self.inputs)
            self.inputs.append(input.detach().clone())
            self.buffers[index] = input.untyped_storage().data_ptr()
            result = torch.empty_like(output)
            original(result, input, *args, **kwargs)
            self.add([name, index, bool(async_op)], kwargs.get("group"))
            if not async_op:
                output.copy_(result)
                return None
            if output.is_floating_point():  # in flight: no part of it is defined yet
                output.fill_(float("nan"))
            return Handle(self, index, output, result)

        call.__name__ = name
        return call

    def broadcast(self, tensor, src=None, group=None, async_op=False, **kwargs):
        """broadcast, unchanged; recorded with the tensor's numel."""
        broadcast = self.saved["broadcast"]
        work = broadcast(tensor, src, group=group, async_op=async_op, **kwargs)
        self.add(["broadcast", tensor.numel()], group)
        return work

    def recorded(self, name: str):
        """Collective `name`, unchanged, recorded by name."""
        original = self.saved[name]

        def call(*args, **kwargs):
            work = original(*args, **kwargs)
            self.add([name], kwargs.get("group", -1))  # p2p and coalesced: not checked
            return work

        return call
