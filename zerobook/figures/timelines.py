"""Timelines of a measured step, from its events (zerobook.zero.timeline): each run's
communication and computation lanes, the gathered bytes over the step, and ZeRO-3's gather ->
compute -> free unit by unit. Notebook side: the events are passed in, already recorded.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from zerobook.figures.style import PALETTE, gantt, reference_lines


def timeline_chart(runs: dict[str, list]):
    """One Gantt chart per run (name -> events): communication and computation lanes, in ms."""
    from zerobook.zero.timeline import timeline_bars  # here: its package imports torch

    fig, axes = plt.subplots(
        len(runs), 1, sharex=True, figsize=(7.2, 1.5 * len(runs) + 0.7), squeeze=False
    )
    for ax, (name, events) in zip(axes[:, 0], runs.items()):
        gantt(ax, timeline_bars(events))
        ax.set_title(name)
    axes[-1, 0].set_xlabel("time since the step began (ms)")
    fig.tight_layout()
    return fig


def gathered_bytes_chart(runs: dict[str, list], lines: dict[str, float], kept: int = 0):
    """Bytes of full (gathered) parameters over one step, per run (name -> events), in KiB, on
    top of `kept` (the shards a rank keeps between steps); `lines`: label -> bytes, drawn across."""
    from zerobook.zero.timeline import events_from  # here: its package imports torch

    colors = [PALETTE["black"], PALETTE["blue"], PALETTE["orange"], PALETTE["green"]]
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    for (name, events), color in zip(runs.items(), colors):
        events = events_from(events)
        ax.step(
            [e.t * 1e3 for e in events],
            [(kept + e.gathered) / 1024 for e in events],
            where="post",
            color=color,
            label=name,
        )
    reference_lines(ax, {label: value / 1024 for label, value in lines.items()})
    what = (
        "shards kept + full parameters gathered"
        if kept
        else "full parameters allocated"
    )
    ax.set(
        xlabel="time since the step began (ms)",
        ylabel=f"{what} (KiB)",
        title="Model-state bytes on rank 0 through one step"
        if kept
        else "Gathered parameters on rank 0 through one step",
    )
    ax.grid(True, alpha=0.3)
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=len(runs)
    )  # below: no curve there
    return fig


def held_spans(events, unit_bytes: dict[str, int]) -> list[tuple[str, float, float]]:
    """(unit, start, end) while a unit's full parameters exist: from the first gather issued to
    the "computed" or "reduce-scatter" event after which the bytes allocated fall by the unit's
    full bytes (it was freed; the root, kept, is not)."""
    from zerobook.zero.timeline import (
        GATHERS,
        events_from,
    )  # here: its package imports torch

    events, spans, start = events_from(events), [], {}
    for e, after in zip(events, events[1:] + [None]):
        if e.what in GATHERS:
            start.setdefault(e.unit, e.t)
        freed = after is None or after.gathered <= e.gathered - unit_bytes[e.unit]
        if e.what in ("computed", "reduce-scatter") and freed and e.unit in start:
            spans.append((e.unit, start.pop(e.unit), e.t))
    return spans + [(unit, t, events[-1].t) for unit, t in start.items()]


def unit_timeline_chart(events, unit_bytes: dict[str, int]):
    """One lane per unit (forward order): while its full parameters are held (grey, x where freed),
    its all-gathers and reduce-scatter (orange) and its forward and backward (blue), in ms."""
    from zerobook.zero.timeline import events_from, timeline_bars

    events = events_from(events)
    units = list(dict.fromkeys(e.unit for e in events))
    lane = {u: i for i, u in enumerate(units)}
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(units) + 1.6))
    for unit, start, end in held_spans(events, unit_bytes):
        ax.barh(
            lane[unit],
            (end - start) * 1e3,
            left=start * 1e3,
            height=0.8,
            color="#dddddd",
        )
        ax.plot(end * 1e3, lane[unit], marker="x", color="black", markersize=6)
    colors = {"communication": PALETTE["orange"], "computation": PALETTE["blue"]}
    for kind, start, end, unit in timeline_bars(events):
        ax.barh(
            lane[unit],
            (end - start) * 1e3,
            left=start * 1e3,
            height=0.4,
            color=colors[kind],
        )
    handles = [
        Patch(color="#dddddd", label="full parameters held"),
        Patch(color=PALETTE["orange"], label="all-gather / reduce-scatter"),
        Patch(color=PALETTE["blue"], label="forward / backward"),
        plt.Line2D([], [], marker="x", color="black", linestyle="none", label="freed"),
    ]
    ax.set(
        yticks=range(len(units)),
        yticklabels=units,
        ylim=(len(units) - 0.4, -0.6),
        xlabel="time since the step began (ms)",
    )
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=4,
        frameon=False,
    )
    ax.grid(True, axis="x", alpha=0.3)
    return fig
