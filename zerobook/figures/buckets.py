"""Gradient buckets in flight against backward: one lane per bucket, from its all-reduce's start
to its completion, over the span of backward (zerobook.runs.ddp_overlap's record).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.figures.style import PALETTE

TITLES = {
    "bucketed": "buckets all-reduced after backward",
    "overlap": "each bucket all-reduced as soon as it is full",
}


def bucket_timeline_chart(report: dict, modes=("bucketed", "overlap")):
    """One panel per mode: backward shaded, each bucket's all-reduce a bar (start to
    completion, in ms from backward's start), every gradient's arrival a tick below."""
    fig, axes = plt.subplots(
        len(modes), 1, figsize=(7, 1.2 + 1.6 * len(modes)), sharex=True, squeeze=False
    )
    for ax, mode in zip(axes[:, 0], modes):
        draw_mode(ax, report[mode])
        ax.set_title(TITLES.get(mode, mode))
    axes[-1, 0].set_xlabel("time from the start of backward (ms)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncols=3, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig


def draw_mode(ax, record: dict) -> None:
    """One step: backward's span, each bucket's all-reduce in its lane, the gradients' arrivals."""
    lanes = len(record["launched"])
    ax.axvspan(
        0,
        record["backward_end"] * 1e3,
        color=PALETTE["sky"],
        alpha=0.35,
        label="backward",
    )
    for lane, (start, end) in enumerate(zip(record["launched"], record["done"])):
        ax.broken_barh(
            [(start * 1e3, (end - start) * 1e3)],
            (lane + 0.15, 0.7),
            color=PALETTE["orange"],
            label="all-reduce in flight" if lane == 0 else None,
        )
    ax.plot(
        [t * 1e3 for t in record["grads"]],
        [-0.5] * len(record["grads"]),
        "|",
        color=PALETTE["blue"],
        markersize=8,
        label="a gradient arrives",
    )
    ax.set(
        ylim=(-1, lanes),
        yticks=[lane + 0.5 for lane in range(lanes)],
        yticklabels=[str(lane) for lane in range(lanes)],
        ylabel="bucket\n(filled in order)",
    )
    ax.grid(True, axis="x", alpha=0.3)
