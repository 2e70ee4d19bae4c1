"""The performance model's predictions against published measurements
(zerobook.perfmodel.published), one panel per kind: bus bandwidths and training throughputs
(chapters/appendix_perfmodel).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import matplotlib.ticker

from zerobook.figures.style import PALETTE

TITLES = {"busbw": "collectives' busbw", "tokens": "FSDP throughput"}
UNITS = {"busbw": "GB/s busbw", "tokens": "tokens/s/GPU"}


def validation_chart(published, goal: dict):
    """Predicted against published on log axes, y = x and the goal's band (kind -> fraction);
    the fitted row hollow."""
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.4))
    for ax, kind in zip(axes, ("busbw", "tokens")):
        rows = [r for r in published if r["kind"] == kind]
        line = [
            min(r["published"] for r in rows) / 1.6,
            max(r["published"] for r in rows) * 1.6,
        ]
        ax.plot(line, line, color="gray", lw=1)
        ax.fill_between(
            line,
            [x * (1 - goal[kind]) for x in line],
            [x * (1 + goal[kind]) for x in line],
            color="gray",
            alpha=0.15,
        )
        for r in rows:
            ax.scatter(
                r["published"],
                r["predicted"],
                s=28,
                color=PALETTE["green"],
                facecolors="none" if r["fitted"] else PALETTE["green"],
            )
        ax.set(
            xscale="log",
            yscale="log",
            xlim=line,
            ylim=line,
            xlabel=f"published ({UNITS[kind]})",
            ylabel="predicted",
            title=TITLES[kind],
        )
        log_ticks(ax)
    fig.tight_layout()
    return fig


def tick_label(value: float, _=None) -> str:
    """500, 1k, 20k: short enough that a decade's three ticks do not collide."""
    return f"{value / 1000:g}k" if value >= 1000 else f"{value:g}"


def log_ticks(ax) -> None:
    """Ticks at 1, 2, 5 of each decade, written short (tick_label)."""
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1, 2, 5)))
        axis.set_major_formatter(matplotlib.ticker.FuncFormatter(tick_label))
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
