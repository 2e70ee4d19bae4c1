"""One training step as operations on streams (computation and communication; HSDP's all-reduce
on a third), and when each runs: a small list scheduler, as CUDA streams behave.

Each stream runs its operations in program order; an operation starts when its stream is free and
its dependencies allow: ("end", op) waits for an operation to finish, ("start", op) for it to begin
(a prefetch issued when a unit's forward starts). Where communication cannot run beside
computation (a CPU host: both need the cores), both streams are one.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Op:
    """An operation: `what` on `unit`, on `stream`, lasting `seconds`, after `deps`."""

    stream: str
    what: str
    unit: str
    seconds: float
    deps: list = field(default_factory=list)  # [("end" | "start", Op)]
    start: float | None = None

    @property
    def end(self) -> float:
        return self.start + self.seconds


@dataclass(frozen=True)
class Span:
    """A scheduled operation: on `stream`, `what` happened to `unit` from `start` to `end` seconds."""

    stream: str
    what: str
    unit: str
    start: float
    end: float


class Program:
    """Operations appended in each stream's program order."""

    def __init__(self, overlap: bool = True):
        self.overlap, self.ops = overlap, []

    def add(self, stream: str, what: str, unit: str, seconds: float, *deps) -> Op:
        op = Op(stream if self.overlap else "compute", what, unit, seconds, list(deps))
        self.ops.append(op)
        return op

    def schedule(self) -> list[Span]:
        """Start times for every operation (each stream in program order); the spans, by start."""
        queues: dict[str, list[Op]] = {}
        for op in self.ops:
            queues.setdefault(op.stream, []).append(op)
        free = {stream: 0.0 for stream in queues}
        while any(queues.values()):
            progressed = False
            for stream, queue in queues.items():
                while queue and all(dep.start is not None for _, dep in queue[0].deps):
                    op = queue.pop(0)
                    op.start = max(
                        [free[stream]]
                        + [d.end if kind == "end" else d.start for kind, d in op.deps]
                    )
                    free[stream] = op.end
                    progressed = True
            if not progressed:
                raise RuntimeError(
                    "the step's operations wait on each other: a cycle in the program"
                )
        return sorted(
            (Span(o.stream, o.what, o.unit, o.start, o.end) for o in self.ops),
            key=lambda s: s.start,
        )
