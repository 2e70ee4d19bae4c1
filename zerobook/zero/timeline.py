"""ZeRO-3's timeline: what happened to which unit when, as typed records, and the phases a
Chrome trace shows.

    zero.events                        # [Event(t, what, unit, gathered), ...] of the steps so far
    bars = timeline_bars(zero.events)  # (lane, start, end, unit): communication and computation
    index(events, "prefetch", "blocks.1") < index(events, "computed", "blocks.0")

In a report an Event travels as a dict with the same keys; `events_from` turns those back into
Events on the notebook side. Pure Python (torch.profiler only once a span opens), so plots use it.
"""

from __future__ import annotations

from dataclasses import dataclass

GATHERS = (
    "gather",
    "gather (backward)",
    "gather (recompute)",
    "prefetch",
)  # a gather is issued
SPANS = {
    "gather": "wait all-gather",
    "gather (recompute)": "wait all-gather",
    "compute": "forward",
    "gather (backward)": "wait all-gather",
    "backward": "backward",
    "reduce-scatter": "reduce-scatter",
}  # event -> the profiler range it opens
SPAN_ENDS = {
    "compute",
    "computed",
    "backward",
    "reduce-scatter",
    "reduced",
}  # events that close one


@dataclass(frozen=True)
class Event:
    """At `t` seconds, `what` happened to `unit`; `gathered`: bytes of full parameters allocated then."""

    t: float
    what: str
    unit: str
    gathered: int


def events_from(records) -> list[Event]:
    """Events from a report (dicts with Event's keys), or Events as they are."""
    return [r if isinstance(r, Event) else Event(**r) for r in records]


def index(events, what: str, unit: str, after: int = 0) -> int:
    """Position of the first event (what, unit) at or after `after`."""
    return next(
        i
        for i, e in enumerate(events_from(events))
        if i >= after and (e.what, e.unit) == (what, unit)
    )


def peak(events) -> int:
    """The most bytes of full parameters allocated at any event."""
    return max(e.gathered for e in events_from(events))


def timeline_bars(events) -> list[tuple[str, float, float, str]]:
    """(lane, start, end, unit) bars, root left out (its forward and backward enclose everyone
    else's). Communication: from a gather's issue (or prefetch) to the moment the unit can
    compute, and from a reduce-scatter's start to its end; computation: forward from "compute" to
    "computed", backward from "backward" to the unit's reduce-scatter."""
    bars, issued, started = [], {}, {}
    for e in events_from(events):
        if e.unit == "root":
            continue
        if e.what in GATHERS:
            issued.setdefault(e.unit, e.t)
        elif e.what in ("compute", "backward"):
            bars.append(("communication", issued.pop(e.unit), e.t, e.unit))
            started[e.unit] = e.t
        elif e.what in ("computed", "reduce-scatter"):
            bars.append(("computation", started.pop(e.unit), e.t, e.unit))
            if e.what == "reduce-scatter":
                issued[e.unit] = e.t
        elif e.what == "reduced":
            bars.append(("communication", issued.pop(e.unit), e.t, e.unit))
    return bars


class ProfilerSpans:
    """torch.profiler ranges per unit: an event that opens a phase opens "zero3 PHASE UNIT", the
    event that ends it closes it (a Chrome trace then shows them beside torch's collectives)."""

    def __init__(self):
        self.open: dict = {}  # unit -> its open torch.profiler.record_function

    def on(self, what: str, unit: str) -> None:
        from torch.profiler import record_function

        if what in SPAN_ENDS and unit in self.open:
            self.open.pop(unit).__exit__(None, None, None)
        if what in SPANS:
            span = self.open[unit] = record_function(f"zero3 {SPANS[what]} {unit}")
            span.__enter__()
