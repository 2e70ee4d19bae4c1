"""What a run reported, drawn: each rank's value before and after one all-reduce (the launching
chapter's first run), a run killed and resumed from its checkpoint against one never stopped, and
where each rank's step went when one rank is slow (a straggler).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.figures.style import PALETTE


def all_reduce_chart(reports: list[dict]):
    """What each rank contributed and what all-reduce (SUM) left on it, from the ranks' reports
    (zerobook.runs.hello: `rank`, `contribution`, `total`)."""
    ranks = [r["rank"] for r in reports]
    fig, ax = plt.subplots(figsize=(6, 3))
    for shift, key, color, label in (
        (-0.2, "contribution", PALETTE["blue"], "contributed"),
        (0.2, "total", PALETTE["vermillion"], "held after all-reduce (SUM)"),
    ):
        bars = ax.bar(
            [r + shift for r in ranks],
            [r[key] for r in reports],
            width=0.4,
            color=color,
            label=label,
        )
        ax.bar_label(bars, fmt="%g")
    ax.set(
        xticks=ranks,
        xticklabels=[f"rank {r}" for r in ranks],
        ylabel="value",
        ylim=(0, 1.35 * max(r["total"] for r in reports)),
        title=f"{len(ranks)} processes, one all-reduce",
    )
    ax.legend(loc="upper left", ncol=2, frameon=False)
    return fig


def resume_chart(never: dict, resumed: dict, start: int, kill_step: int):
    """Loss per step (step -> loss) of a run never interrupted and of one whose rank was killed
    before `kill_step` and that resumed from the checkpoint at `start`: the steps run twice shaded."""
    never, resumed = (
        {int(k): v for k, v in d.items()} for d in (never, resumed)
    )  # JSON: str keys
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot(
        list(never),
        list(never.values()),
        marker="o",
        color=PALETTE["black"],
        label="never interrupted",
    )
    ax.plot(
        list(resumed),
        list(resumed.values()),
        linestyle="none",
        marker="x",
        markersize=10,
        color=PALETTE["vermillion"],
        label=f"resumed from step {start}",
    )
    ax.axvspan(
        start - 0.4,
        kill_step - 0.6,
        color=PALETTE["sky"],
        alpha=0.3,
        label="run before the kill, and again",
    )
    ax.axvline(kill_step - 0.5, color="grey", linestyle=":")
    ax.annotate(
        "SIGKILL",
        xy=(kill_step - 0.5, 1),
        xycoords=("data", "axes fraction"),
        xytext=(3, -12),
        textcoords="offset points",
        color="dimgrey",
    )
    ax.set(xlabel="step", ylabel="loss (rank 0)", xticks=list(never))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, frameon=False)
    ax.grid(True, alpha=0.3)
    return fig


def straggler_chart(reports: list[dict], skip: int = 1):
    """Each rank's step split in two, in ms, the mean over its steps after the first `skip`:
    computing (forward and backward) and inside the all-reduces (zerobook.runs.gone_wrong's
    `steps`: `compute_s`, `reduce_s`). The rank that waits least is the one the others wait for."""
    ranks = [r["rank"] for r in reports]

    def mean(report, key):
        steps = report["steps"][skip:]
        return 1e3 * sum(s[key] for s in steps) / len(steps)

    compute = [mean(r, "compute_s") for r in reports]
    waiting = [mean(r, "reduce_s") for r in reports]
    fig, ax = plt.subplots(figsize=(6, 2.2 + 0.35 * len(ranks)))
    ax.barh(ranks, compute, color=PALETTE["blue"], label="computing")
    ax.barh(
        ranks,
        waiting,
        left=compute,
        color=PALETTE["orange"],
        label="in the all-reduces",
    )
    ax.set(
        yticks=ranks,
        yticklabels=[f"rank {r}" for r in ranks],
        ylim=(len(ranks) - 0.4, -0.6),
        xlabel="time per step (ms, mean)",
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=2, frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
