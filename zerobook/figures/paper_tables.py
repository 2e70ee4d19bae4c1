"""The ZeRO paper's printed Table 1 against the calculator (zerobook.accounting.memory): how far
each printed cell is from the exact value, in units of its last printed digit. Rounding leaves a
cell within half a unit; truncation up to one unit below.

    differences = table1_differences()       # {(model, N, stage): units of the last digit}
    fig = table1_differences_chart(differences)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from zerobook.accounting import memory
from zerobook.accounting import zero_paper as paper
from zerobook.figures.style import PALETTE, STAGE_COLORS

MARKERS = {"7.5B": "o", "128B": "s", "1T": "^"}


def table1_differences() -> dict:
    """{(model, N, stage): (printed - calculator) / one unit of the cell's last printed digit}."""
    differences = {}
    for model, by_n in paper.TABLE_1.items():
        for n, printed in by_n.items():
            for stage, cell in zip((1, 2, 3), printed):
                ours = memory.model_state_bytes(
                    paper.TABLE_1_MODELS[model], stage=stage, world_size=n
                ).total
                gap = paper.value(cell) - ours / memory.GB
                differences[model, n, stage] = gap / paper.last_digit(cell)
    return differences


def place(sizes: list, model: str, n: int, stage: int) -> float:
    """A cell's x: its N's position, the models side by side, the stages a little apart."""
    return sizes.index(n) + (list(MARKERS).index(model) - 1) * 0.25 + (stage - 2) * 0.06


def table1_differences_chart(differences: dict):
    """Each printed cell of Table 1 as a point: its N (models side by side), its difference from
    the calculator in units of its last digit; bands for rounding and for the check's tolerance."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    sizes = sorted({n for _, n, _ in differences})
    ax.axhspan(-1, 1, color=PALETTE["sky"], alpha=0.12, linewidth=0)
    ax.axhspan(-0.5, 0.5, color=PALETTE["sky"], alpha=0.25, linewidth=0)
    for (model, n, stage), gap in differences.items():
        ax.plot(
            place(sizes, model, n, stage),
            gap,
            MARKERS[model],
            color=STAGE_COLORS[stage],
            markersize=5,
            markeredgecolor="white",
            markeredgewidth=0.4,
        )
    for y, text in (
        (0.5, "rounded: within half a unit"),
        (1, "the check: under one unit"),
    ):
        ax.annotate(
            text,
            xy=(0, y),
            xycoords=("axes fraction", "data"),
            xytext=(4, -3),
            textcoords="offset points",
            va="top",
            color="dimgrey",
        )
    model, n, stage = "1T", 64, 1  # the cell the text quotes: 4187 for 4187.5
    printed = paper.TABLE_1[model][n][stage - 1]
    exact = paper.value(printed) - differences[model, n, stage] * paper.last_digit(
        printed
    )
    ax.annotate(
        f"{model}, N = {n}: {printed} printed for {exact:g}",
        xy=(place(sizes, model, n, stage), differences[model, n, stage]),
        xytext=(1.7, -0.8),
        textcoords="data",
        ha="center",
        va="center",
        color="dimgrey",
        arrowprops={"arrowstyle": "->", "color": "dimgrey", "linewidth": 0.8},
    )
    ax.set_xticks(range(len(sizes)), [str(n) for n in sizes])
    ax.set(
        xlim=(-0.5, len(sizes) - 0.5),
        ylim=(-1.1, 1.1),
        xlabel="data-parallel degree N",
        ylabel="printed − calculator\n(units of the last digit)",
        title="The ZeRO paper's Table 1, cell by cell",
    )
    ax.grid(True, axis="y", alpha=0.3)
    handles = [
        Line2D([], [], marker=m, linestyle="", color="dimgrey", label=model)
        for model, m in MARKERS.items()
    ] + [
        Line2D([], [], marker="o", linestyle="", color=STAGE_COLORS[s], label=name)
        for s, name in ((1, "P_os"), (2, "P_os+g"), (3, "P_os+g+p"))
    ]
    ax.legend(
        handles=handles,
        ncol=6,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        frameon=False,
        columnspacing=1.0,
        handletextpad=0.3,
    )
    fig.tight_layout()
    return fig
