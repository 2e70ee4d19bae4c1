"""FSDP2's choices drawn from what its runs reported: the units `fully_shard` made and the order
they are gathered in, a meta-device model materialised shard by shard on each rank, and HSDP's
2-D mesh with the collectives that ran along each of its dimensions.

    units_and_gathers(params, trace)      # zerobook.runs.fsdp2_practice: dtensor, wrapping
    meta_materialised(rank_params, full_bytes)   # every rank's dtensor rows, meta's full bytes
    hsdp_mesh(ranks)                      # zerobook.runs.hsdp: every rank's groups and traffic
"""

from __future__ import annotations

import math
import re

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

from zerobook.figures.style import PALETTE

WORDS = {
    "all_gather_into_tensor": "all-gather",
    "reduce_scatter_tensor": "reduce-scatter",
    "all_reduce": "all-reduce",
}
UNIT_COLORS = [PALETTE["black"], PALETTE["blue"], PALETTE["orange"], PALETTE["green"]]
UNIT_COLORS += [PALETTE["purple"], PALETTE["sky"], PALETTE["vermillion"]]


def owner(name: str, units) -> str:
    """The unit that owns parameter `name`: the longest unit whose name prefixes it, else the
    root (what fully_shard on the root takes: every parameter no inner unit took)."""
    inner = [u for u in units if u != "root" and name.startswith(u + ".")]
    return max(inner, key=len, default="root")


def unit_colors(units) -> dict:
    return {u: UNIT_COLORS[i % len(UNIT_COLORS)] for i, u in enumerate(units)}


def units_and_gathers(params: list[dict], trace: dict):
    """Left: each unit's parameters (elements, tensors) from the model's full shapes. Right: the
    step's all-gathers in the order issued, by unit; an arrow marks one issued by another unit's
    hook (a prefetch). `params`: rows with "name" and "full"; `trace`: zerobook.fsdp2.traced_step."""
    units = list(dict.fromkeys(g["unit"] for g in trace["order"]))
    sizes = {u: [0, 0] for u in units}
    for p in params:
        size = sizes[owner(p["name"], units)]
        size[0] += math.prod(p["full"])
        size[1] += 1
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(7, 3.2), sharey=True, gridspec_kw={"width_ratios": [1, 1.45]}
    )
    lane = {u: i for i, u in enumerate(units)}
    colors = unit_colors(units)
    for u in units:
        left.barh(lane[u], sizes[u][0], color=colors[u], height=0.6)
        left.annotate(
            f"{sizes[u][0]:,} in {sizes[u][1]} tensors",
            (sizes[u][0], lane[u]),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
        )
    left.set_xlim(0, max(s[0] for s in sizes.values()) * 2.1)
    left.set(
        yticks=range(len(units)), yticklabels=units, xlabel="parameters (elements)"
    )
    left.invert_yaxis()
    left.spines[["top", "right"]].set_visible(False)
    left.set_xticks([])
    for x, g in enumerate(trace["order"], start=1):
        if g["by"] != g["unit"]:
            right.annotate(
                "",
                (x, lane[g["unit"]]),
                (x, lane[g["by"]]),
                arrowprops={"arrowstyle": "->", "color": "grey", "lw": 1.2},
            )
        style = (
            ("o", PALETTE["blue"])
            if g["pass"] == "forward"
            else ("s", PALETTE["vermillion"])
        )
        right.plot(x, lane[g["unit"]], style[0], color=style[1], markersize=9)
    right.plot([], [], "o", color=PALETTE["blue"], label="forward")
    right.plot([], [], "s", color=PALETTE["vermillion"], label="backward")
    right.plot(
        [],
        [],
        color="grey",
        marker=r"$\uparrow$",
        ls="",
        label="prefetch, from the hook's unit",
    )
    right.set(
        xticks=range(1, len(trace["order"]) + 1),
        xlim=(0.4, len(trace["order"]) + 0.6),
        xlabel="all-gathers of one step, in order",
    )
    right.grid(True, axis="y", alpha=0.3)
    right.spines[["top", "right"]].set_visible(False)
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3, frameon=False)
    fig.tight_layout()
    return fig


def unit_bytes_per_rank(rank_params: list[list[dict]], units, element_size: int = 4):
    """bytes[rank][unit] of the local shards each rank holds (fp32 unless told)."""
    held = []
    for rows in rank_params:
        per_unit = dict.fromkeys(units, 0)
        for p in rows:
            per_unit[owner(p["name"], units)] += element_size * math.prod(p["local"])
        held.append(per_unit)
    return held


def meta_materialised(
    rank_params: list[list[dict]], full_bytes: int, element_size: int = 4
):
    """Bars: the model built on meta (no bytes), then each rank's shards after to_empty and
    init_weights, stacked by unit, against a line at the whole model's bytes. `rank_params[r]`:
    rank r's rows with "name" and "local" (its shard's shape)."""
    names = [p["name"] for p in rank_params[0]]
    units = ["root"] + sorted(
        {
            n.split(".")[0] + "." + n.split(".")[1]
            for n in names
            if n.startswith("blocks.")
        }
    )
    held = unit_bytes_per_rank(rank_params, units, element_size)
    colors = unit_colors(units)
    labels = ["built on meta\n(every rank)"] + [f"rank {r}" for r in range(len(held))]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ax.bar(0, 0)
    ax.annotate(
        "0 bytes", (0, 0), xytext=(0, 4), textcoords="offset points", ha="center"
    )
    for r, per_unit in enumerate(held, start=1):
        bottom = 0
        for u in units:
            ax.bar(
                r,
                per_unit[u] / 1e3,
                bottom=bottom,
                color=colors[u],
                width=0.6,
                label=u if r == 1 else None,
                edgecolor="white",
                linewidth=0.5,
            )
            bottom += per_unit[u] / 1e3
        ax.annotate(
            f"{sum(per_unit.values()):,}",
            (r, bottom),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
        )
    ax.axhline(full_bytes / 1e3, linestyle="--", color="grey", linewidth=1)
    ax.annotate(
        f"the whole model: {full_bytes:,} bytes",
        (0.02, full_bytes / 1e3),
        xycoords=("axes fraction", "data"),
        xytext=(0, 4),
        textcoords="offset points",
        color="dimgrey",
    )
    ax.set(
        xticks=range(len(labels)),
        xticklabels=labels,
        ylabel="kB held (10³ bytes)",
        ylim=(0, full_bytes / 1e3 * 1.15),
    )
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(title="unit", loc="center left", bbox_to_anchor=(1, 0.5), frameon=False)
    fig.tight_layout()
    return fig


def groups_of(traffic: dict) -> dict:
    """{group (tuple of ranks): {op: calls}} from a CommMeter summary by group."""
    out: dict = {}
    for key, entry in traffic.items():
        op, ranks = re.fullmatch(r"(\w+) over \((.*)\)", key).groups()
        group = tuple(int(r) for r in ranks.split(",") if r.strip())
        out.setdefault(group, {})[WORDS.get(op, op)] = entry["calls"]
    return out


def hsdp_mesh(ranks: list[dict]):
    """The (replicate x shard) mesh: a row per shard group (together a whole model), a column per
    shard (its replicate group), each link labelled with the collectives that ran in that group.
    `ranks[r]`: "shard_group", "replicate_group" and "traffic" (CommMeter's summary by group)."""
    rows = sorted({tuple(r["shard_group"]) for r in ranks})
    where = {rank: (i, j) for i, row in enumerate(rows) for j, rank in enumerate(row)}
    for rank, r in enumerate(
        ranks
    ):  # the columns must be the replicate groups reported
        column = [row[where[rank][1]] for row in rows]
        assert column == list(r["replicate_group"]), (
            rank,
            column,
            r["replicate_group"],
        )
    fig, ax = plt.subplots(figsize=(7, 1.7 * len(rows) + 0.9))
    shard_colors = [
        PALETTE["sky"],
        PALETTE["orange"],
        PALETTE["green"],
        PALETTE["purple"],
    ]
    w, h, dx, dy = 1.3, 0.62, 3.0, 1.5
    for rank, (i, j) in where.items():
        x, y = j * dx, -i * dy
        ax.add_patch(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0.04",
                color=shard_colors[j % 4],
                alpha=0.85,
            )
        )
        ax.text(x, y, f"rank {rank}\nshard {j}", ha="center", va="center")
    for i, row in enumerate(rows):
        calls = groups_of(ranks[row[0]]["traffic"]).get(row, {})
        for j in range(len(row) - 1):
            ax.annotate(
                "",
                (j * dx + dx - w / 2, -i * dy),
                (j * dx + w / 2, -i * dy),
                arrowprops={"arrowstyle": "<->", "color": PALETTE["blue"], "lw": 1.5},
            )
            text = "\n".join(f"{op} ×{n}" for op, n in calls.items())
            ax.text(
                (j + 0.5) * dx,
                -i * dy + 0.06,
                text,
                ha="center",
                va="bottom",
                color=PALETTE["blue"],
            )
        ax.text(
            -w / 2 - 0.25,
            -i * dy,
            f"shard group\n{row}:\na whole model",
            ha="right",
            va="center",
        )
    for j in range(len(rows[0])):
        column = tuple(row[j] for row in rows)
        calls = groups_of(ranks[column[0]]["traffic"]).get(column, {})
        for i in range(len(rows) - 1):
            ax.annotate(
                "",
                (j * dx, -(i + 1) * dy + h / 2),
                (j * dx, -i * dy - h / 2),
                arrowprops={
                    "arrowstyle": "<->",
                    "color": PALETTE["vermillion"],
                    "lw": 1.5,
                },
            )
        text = ", ".join(f"{op} ×{n}" for op, n in calls.items())
        ax.text(
            j * dx + 0.12,
            -(len(rows) - 1) * dy / 2,
            text,
            va="center",
            color=PALETTE["vermillion"],
        )
        ax.text(
            j * dx,
            -(len(rows) - 1) * dy - h / 2 - 0.15,
            f"replicate group {column}:\nshard {j}",
            ha="center",
            va="top",
        )
    ax.set(
        xlim=(-w / 2 - 1.9, (len(rows[0]) - 1) * dx + w / 2 + 1.3),
        ylim=(-(len(rows) - 1) * dy - h / 2 - 0.7, h / 2 + 0.55),
    )
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig
