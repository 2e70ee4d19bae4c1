"""Diagrams of the ideas, drawn from the real data structures so they stay true when the code changes.

    shard_layout_chart(flat, labels)      a FlatParams cut into padded shards: who holds what, per stage
    stacked_bytes_chart(rows)             bytes by kind, stacked (model_states_rows: zerobook.accounting.memory)

Notebook side; no torch at import (a FlatParams is passed in, already built).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from matplotlib.patches import Patch, Rectangle

from zerobook.accounting import memory, recipes

from zerobook.figures.style import PALETTE

KINDS = ("params", "grads", "optimizer")


KIND_COLORS = {
    "params": PALETTE["blue"],
    "grads": PALETTE["orange"],
    "optimizer": PALETTE["green"],
}


KIND_NAMES = {
    "params": "16-bit params (2 B)",
    "grads": "16-bit grads (2 B)",
    "optimizer": "fp32 master, m, v (12 B)",
}


OTHER_COLORS = [
    PALETTE["sky"],
    PALETTE["purple"],
    PALETTE["vermillion"],
    PALETTE["yellow"],
]


def sharded_kinds(stage: int, world_size: int) -> set[str]:
    """The kinds of model state a stage divides by N (zerobook.accounting.memory's accounting)."""
    whole = memory.bytes_per_param(stage=0, world_size=world_size)
    cut = memory.bytes_per_param(stage=stage, world_size=world_size)
    return {k for k in KINDS if getattr(cut, k) < getattr(whole, k)}


def held_ranges(flat, stage: int, rank: int) -> dict[str, list[tuple[int, int]]]:
    """Element ranges [start, stop) of the flat buffer that `rank` holds, per kind: its N-th of
    every bucket for what `stage` shards, the whole padded buffer for the rest."""
    mine = [
        (
            b.start + rank * b.shard_numel(flat.world_size),
            b.start + (rank + 1) * b.shard_numel(flat.world_size),
        )
        for b in flat.buckets
    ]
    cut = sharded_kinds(stage, flat.world_size)
    return {k: mine if k in cut else [(0, flat.padded)] for k in KINDS}


def padding_ranges(flat) -> list[tuple[int, int]]:
    """Where the zeros added to each bucket (to reach a multiple of N) sit in the flat buffer."""
    ends = [
        flat.offsets[b.last - 1] + flat.params[b.last - 1].numel() for b in flat.buckets
    ]
    return [
        (end, b.start + b.numel)
        for b, end in zip(flat.buckets, ends)
        if end < b.start + b.numel
    ]


def held_bytes(flat, stage: int, rank: int) -> int:
    """Bytes of model state `rank` holds at `stage`, counted from held_ranges (the ZeRO paper's
    2 + 2 + 12 bytes per element: zerobook.accounting.memory's recipe)."""
    recipe, ranges = recipes.RECIPES["zero_paper"], held_ranges(flat, stage, rank)
    sizes = (recipe.param_bytes, recipe.grad_bytes, recipe.optimizer_bytes)
    return sum(size * sum(b - a for a, b in ranges[k]) for k, size in zip(KINDS, sizes))


def draw_buffer(ax, flat, labels) -> None:
    """The flat buffer: one box per parameter (labelled), padding hatched, each rank's N-th marked."""
    for i, (offset, label) in enumerate(zip(flat.offsets, labels)):
        n = flat.params[i].numel()
        shade = "#e8e8e8" if i % 2 else "white"
        ax.add_patch(Rectangle((offset, 0), n, 1, facecolor=shade, edgecolor="black"))
        ax.text(
            offset + n / 2,
            0.5,
            label,
            ha="center",
            va="center",
            zorder=4,  # above the rank cuts
            bbox={"facecolor": shade, "edgecolor": "none", "pad": 1},
        )
    for a, b in padding_ranges(flat):
        ax.add_patch(
            Rectangle(
                (a, 0), b - a, 1, facecolor="white", edgecolor="grey", hatch="///"
            )
        )
    for bucket in flat.buckets:
        n = bucket.shard_numel(flat.world_size)
        for r in range(flat.world_size):
            ax.axvline(
                bucket.start + r * n,
                color=PALETTE["vermillion"],
                linewidth=1.5,
                zorder=3,
            )
            ax.text(
                bucket.start + (r + 0.5) * n,
                -0.15,
                f"rank {r}",
                ha="center",
                va="top",
                color=PALETTE["vermillion"],
            )
    ax.set(xlim=(0, flat.padded), ylim=(-0.9, 1.05), yticks=[])
    ax.set_title(
        f"the flat buffer: {flat.numel} elements + {flat.padded - flat.numel} of padding "
        f"(hatched) = {flat.world_size} shards of {flat.shard_numel}",
        loc="left",
    )
    ax.axis("off")


def draw_stage(ax, flat, stage: int) -> None:
    """One stage: for every rank, three lanes (params, grads, optimizer), filled where it holds them."""
    lanes = len(KINDS) + 1  # a gap between ranks
    for rank in range(flat.world_size):
        for lane, (kind, ranges) in enumerate(held_ranges(flat, stage, rank).items()):
            y = rank * lanes + lane
            ax.add_patch(
                Rectangle(
                    (0, y),
                    flat.padded,
                    0.85,
                    facecolor="none",
                    edgecolor="#cccccc",
                    linewidth=0.5,
                )
            )
            for a, b in ranges:
                ax.add_patch(
                    Rectangle(
                        (a, y), b - a, 0.85, facecolor=KIND_COLORS[kind], linewidth=0
                    )
                )
    for a, b in padding_ranges(flat):
        ax.add_patch(
            Rectangle(
                (a, 0),
                b - a,
                flat.world_size * lanes - 1,
                facecolor="none",
                edgecolor="white",
                hatch="///",
                linewidth=0,
            )
        )
    ax.set(
        xlim=(0, flat.padded),
        ylim=(flat.world_size * lanes - 0.8, -0.2),
        xticks=[],
        yticks=[r * lanes + 1.4 for r in range(flat.world_size)],
        yticklabels=[f"rank {r}" for r in range(flat.world_size)],
    )
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(
        f"{memory.STAGE_NAMES[stage]}: {held_bytes(flat, stage, 0):,} B per rank",
        loc="left",
    )


def shard_layout_chart(flat, labels, stages=memory.STAGES):
    """Which rank holds which elements of a FlatParams, per kind of model state, for each stage
    (16-bit params and grads, 2 bytes an element; fp32 master, momentum, variance, 12)."""
    rows = -(-len(stages) // 2)
    fig = plt.figure(figsize=(7, 1.3 + 1.75 * rows))
    grid = fig.add_gridspec(
        rows + 1, 2, height_ratios=[0.75] + [1] * rows, hspace=0.45, wspace=0.25
    )
    draw_buffer(fig.add_subplot(grid[0, :]), flat, labels)
    for i, stage in enumerate(stages):
        draw_stage(fig.add_subplot(grid[1 + i // 2, i % 2]), flat, stage)
    handles = [Patch(color=KIND_COLORS[k], label=KIND_NAMES[k]) for k in KINDS]
    fig.legend(
        handles=handles,
        loc="lower center",
        ncol=3,
        frameon=False,
        bbox_to_anchor=(0.5, -0.02),
    )
    return fig


def model_states_rows(
    num_params: float, world_size: int
) -> dict[str, dict[str, float]]:
    """Bytes per GPU by kind for each stage (zerobook.accounting.memory.stage_table): name -> kind -> bytes."""
    return {
        row["name"]: {k: row[k] for k in KINDS}
        for row in memory.stage_table(num_params, world_size)
    }


def amount(x: float) -> str:
    """A number as a label: three significant digits, thousands grouped (1,257 rather than 1.26e+03)."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def stacked_bytes_chart(
    rows: dict[str, dict[str, float]],
    unit: float = memory.GB,
    unit_name: str = "GB",
    title: str = "",
    xlabel: str = "model states per GPU",
):
    """Horizontal bars, one per row (name -> kind -> bytes), stacked by kind, each segment and
    total labelled in `unit_name`; rows read top to bottom."""
    kinds = list(dict.fromkeys(k for parts in rows.values() for k in parts))
    colors = {
        k: KIND_COLORS.get(k) or OTHER_COLORS[i % len(OTHER_COLORS)]
        for i, k in enumerate(kinds)
    }
    fig, ax = plt.subplots(figsize=(7, 0.55 * len(rows) + 1.5))
    largest, seen = max(sum(parts.values()) for parts in rows.values()) / unit, set()
    for y, parts in enumerate(rows.values()):
        left = 0.0
        for kind, value in parts.items():
            bar = ax.barh(
                y,
                value / unit,
                left=left,
                color=colors[kind],
                height=0.6,
                label=None if kind in seen else KIND_NAMES.get(kind, kind),
            )
            seen.add(kind)
            if value / unit > 0.12 * largest:
                ax.bar_label(
                    bar,
                    labels=[amount(value / unit)],
                    label_type="center",
                    color="white",
                )
            left += value / unit
        ax.text(left + 0.01 * largest, y, f"{amount(left)} {unit_name}", va="center")
    ax.set(
        yticks=range(len(rows)),
        yticklabels=list(rows),
        xlim=(0, 1.22 * largest),
        ylim=(len(rows) - 0.5, -0.5),
        xlabel=f"{xlabel} ({unit_name})",
        title=title,
    )
    if len(kinds) > 1:
        ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncol=min(3, len(kinds)),
            frameon=False,
        )
    ax.grid(True, axis="x", alpha=0.3)
    return fig
