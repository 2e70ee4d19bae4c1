"""The ring all-reduce drawn: each step's chunks on each rank (from the traced sends and
receives), and measured bandwidth against message size with the fitted line.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.figures.style import PALETTE


def ring_steps_chart(traces: list[list[dict]]):
    """Small multiples, one per ring step: which ranks' contributions each chunk holds, per rank.

    traces[r] is rank r's trace from `ring_all_reduce(..., trace=...)` with rank k contributing
    2**k, so a chunk's value lists its contributors as set bits. Two columns, one per phase:
    the start and the reduce-scatter steps down the left, the all-gather steps down the right,
    so that the digits stay at least 9 px tall on a 360 px phone screen.
    """
    world_size, steps = len(traces), len(traces[0])
    initial = [[2**r] * world_size for r in range(world_size)]
    grids = [initial] + [
        [traces[r][s]["holding"] for r in range(world_size)] for s in range(steps)
    ]
    titles = ["start"] + [f"{t['phase']} {t['step'] + 1}" for t in traces[0]]
    rows = world_size  # the start and N-1 reduce-scatter steps; the key, N-1 all-gather steps
    fig, axes = plt.subplots(rows, 2, figsize=(3.9, 1.75 * rows), squeeze=False)
    slots = [axes[r][0] for r in range(rows)] + [axes[r][1] for r in range(1, rows)]
    for ax, grid, title in zip(slots, grids, titles):
        ring_grid(ax, grid)
        ax.set_title(title)
    key = axes[0][1]
    key.axis("off")
    key.text(
        0,
        0.5,
        "each cell: the ranks\nwhose contributions\nthat chunk holds",
        va="center",
        transform=key.transAxes,
    )
    for row in axes:
        row[0].set_ylabel("rank")
    for ax in axes[-1]:
        ax.set_xlabel("chunk")
    fig.tight_layout()
    return fig


def ring_grid(ax, grid) -> None:
    """One step: a rank x chunk grid, each cell naming the ranks whose contributions it holds."""
    world_size = len(grid)
    counts = [[bin(int(v)).count("1") for v in row] for row in grid]
    ax.pcolormesh(
        counts, cmap="Blues", vmin=0, vmax=world_size, edgecolors="white", linewidth=1
    )
    for r, row in enumerate(grid):
        for c, value in enumerate(row):
            members = "".join(str(k) for k in range(world_size) if int(value) >> k & 1)
            members = "all" if len(members) == world_size > 2 else members
            ax.text(
                c + 0.5,
                r + 0.5,
                members,
                ha="center",
                va="center",
                fontsize=9,
                color="white" if counts[r][c] > world_size / 2 else "black",
            )
    ax.set(
        xticks=[c + 0.5 for c in range(world_size)],
        yticks=[r + 0.5 for r in range(world_size)],
        xticklabels=range(world_size),
        yticklabels=range(world_size),
        aspect="equal",
    )
    ax.invert_yaxis()
    ax.tick_params(length=0)


def bandwidth_chart(rows: list[dict], fits: dict):
    """Measured busbw against message size, per implementation and N, with the fitted α-β model."""
    from zerobook.accounting import traffic

    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {"ring": PALETTE["blue"], "builtin": PALETTE["vermillion"]}
    for (impl, n), fit in fits.items():
        mine = [r for r in rows if r["impl"] == impl and r["world_size"] == n]
        sizes = [r["bytes"] for r in mine]
        busbw = [
            traffic.bandwidth(r["bytes"], r["seconds"], "all_reduce", n)["busbw"] / 1e9
            for r in mine
        ]
        model = [
            traffic.bandwidth(s, traffic.predicted_seconds(fit, s), "all_reduce", n)[
                "busbw"
            ]
            / 1e9
            for s in sizes
        ]
        style = "-" if n == max(k[1] for k in fits) else "--"
        ax.plot(
            sizes,
            busbw,
            style,
            marker="o",
            markersize=3,
            color=colors[impl],
            label=f"{impl}, N = {n}",
        )
        ax.plot(sizes, model, ":", color=colors[impl], alpha=0.6)
    ax.set(
        xscale="log",
        xlabel="message size S (bytes)",
        ylabel="bus bandwidth (GB/s, 10^9 B/s)",
        title="All-reduce bus bandwidth: measured (markers) and α-β model (dotted)",
    )
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig
