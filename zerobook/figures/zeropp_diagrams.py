"""ZeRO++'s placements drawn: who keeps which piece of a unit under hpZ, and where qgZ's two
all-to-alls send each piece of the gradients.

    hpz_layout(world_size, node_size)   primary slot, secondary slots and gather groups, per rank
    qgz_routes(world_size, node_size)   each hop's (sender, piece) -> receiver
    hpz_chart(world_size, node_size)    the primary and the secondary partition, side by side
    qgz_chart(world_size, node_size)    the two hops and what each rank ends with

Ranks are numbered node by node (rank = node x g + local index), as zerobook.zero.hpz and
zerobook.zero.qgz number them. The mappings follow those modules' own formulas, written here
without torch; tests/test_zeropp_diagrams.py runs the modules' code and compares.
Notebook side; no torch at import.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from zerobook.figures.style import PALETTE

LOCAL_COLORS = [PALETTE["blue"], PALETTE["orange"], PALETTE["green"], PALETTE["purple"]]
NODE_COLORS = [PALETTE["blue"], PALETTE["orange"], PALETTE["green"], PALETTE["purple"]]


def check_sizes(world_size: int, node_size: int) -> int:
    """The number of nodes; raises unless node_size divides world_size."""
    if node_size < 1 or world_size % node_size:
        raise ValueError(f"node_size {node_size} must divide the {world_size} ranks")
    return world_size // node_size


def hpz_layout(world_size: int, node_size: int) -> dict:
    """Per rank, with a unit's flat buffer cut into `world_size` slots of numel/N:
    `primary` (the one slot ZeRO-3 keeps: FlatParams' r-th N-th), `secondary` (the slots of
    hpZ's piece, flat.view(g, -1)[r % g]), and the ranks of `forward` and `backward`'s
    all-gathers (every rank; the node's ranks, hpz.node_groups)."""
    check_sizes(world_size, node_size)
    per_piece = world_size // node_size  # slots in one secondary piece
    layout = {}
    for rank in range(world_size):
        local, first = rank % node_size, rank - rank % node_size
        layout[rank] = {
            "primary": [rank],
            "secondary": list(range(local * per_piece, (local + 1) * per_piece)),
            "forward": list(range(world_size)),
            "backward": list(range(first, first + node_size)),
        }
    return layout


def qgz_routes(world_size: int, node_size: int) -> dict:
    """qgZ's two hops as {(sender, piece): receiver}, piece p being what rank p keeps.

    Hop 1 (inside the node): row j of pieces.transpose(0, 1) holds the pieces of local index j,
    one per node, and goes to the node's rank j. Hop 2 (across nodes): row n of the node's sums
    (piece n x g + j) goes to node n's rank with the same local index j: rank p itself."""
    nodes = check_sizes(world_size, node_size)
    inside, across = {}, {}
    for sender in range(world_size):
        node, local = divmod(sender, node_size)
        for piece in range(world_size):
            inside[sender, piece] = node * node_size + piece % node_size
        for other in range(nodes):
            across[sender, other * node_size + local] = other * node_size + local
    return {"inside": inside, "across": across}


def rank_grid(ax, world_size: int, node_size: int, xlabel: str) -> None:
    """Axes for a rank x slot grid: rank 0 on top, a line between nodes."""
    ax.set(xlim=(0, world_size), ylim=(world_size, 0), aspect="equal", xlabel=xlabel)
    ax.set_xticks([s + 0.5 for s in range(world_size)], range(world_size))
    ax.set_yticks([r + 0.5 for r in range(world_size)], range(world_size))
    ax.tick_params(length=0)
    for edge in range(node_size, world_size, node_size):
        ax.axhline(edge, color="black", linewidth=1.5)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.grid(False)


def cell(ax, row: int, col: int, color: str, text: str = "") -> None:
    """One filled cell, its text in white."""
    ax.add_patch(plt.Rectangle((col, row), 1, 1, facecolor=color, edgecolor="white"))
    if text:
        ax.text(col + 0.5, row + 0.5, text, ha="center", va="center", color="white")


def bracket(ax, first: int, last: int, x: float, text: str) -> None:
    """A vertical bracket beside rows first..last, labelled (rotated) to its right."""
    ax.plot([x, x + 0.3, x + 0.3, x], [first + 0.1, first + 0.1, last + 0.9, last + 0.9],
            color="black", linewidth=1, clip_on=False)  # fmt: skip
    ax.text(x + 0.55, (first + last + 1) / 2, text, rotation=90, ha="left",
            va="center", clip_on=False)  # fmt: skip


def hpz_chart(world_size: int = 8, node_size: int = 4):
    """Two rank x slot grids: the primary partition (one slot a rank, forward's all-gather over
    every rank) and hpZ's secondary one (N/g slots a rank, backward's all-gather in the node)."""
    layout = hpz_layout(world_size, node_size)
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.7))
    titles = (f"primary: 1/{world_size} each, always",
              f"secondary: 1/{node_size} each,\nfrom forward to backward")  # fmt: skip
    for ax, kind, title in zip(axes, ("primary", "secondary"), titles):
        rank_grid(ax, world_size, node_size, "slot of a unit's flat buffer")
        ax.set_title(title)
        for rank, held in layout.items():
            for slot in held[kind]:
                cell(ax, rank, slot, NODE_COLORS[rank // node_size])
    axes[0].set_ylabel("rank")
    x = world_size + 0.2
    bracket(axes[0], 0, world_size - 1, x, "forward's all-gather")
    groups = sorted({tuple(h["backward"]) for h in layout.values()})
    for n, group in enumerate(groups):
        bracket(axes[1], group[0], group[-1], x, f"node {n} gathers")
    fig.tight_layout(w_pad=3)
    return fig


def qgz_chart(world_size: int = 8, node_size: int = 4):
    """Three rank x piece grids: hop 1 (each cell: the node peer it is sent to), hop 2 (each
    node sum: the rank in another node it is sent to) and the end (each rank's own piece,
    summed over every rank). A cell's colour is its piece's local index (piece mod g)."""
    routes = qgz_routes(world_size, node_size)
    fig, axes = plt.subplots(1, 3, figsize=(7, 3.3))
    panels = (
        ("hop 1: inside the node", routes["inside"]),
        ("hop 2: across nodes", routes["across"]),
        ("end: own piece, summed", {(p, p): None for p in range(world_size)}),
    )
    for ax, (title, route) in zip(axes, panels):
        rank_grid(ax, world_size, node_size, "piece")
        ax.set_title(title)
        for (sender, piece), receiver in route.items():
            text = "Σ" if receiver is None else str(receiver)
            cell(ax, sender, piece, LOCAL_COLORS[piece % node_size], text)
    axes[0].set_ylabel("sending rank")
    handles = [
        Patch(color=LOCAL_COLORS[j], label="pieces " + ", ".join(map(str, pieces)))
        for j in range(node_size)
        if (pieces := range(j, world_size, node_size))
    ]
    fig.legend(handles=handles, loc="lower center", ncol=node_size, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig
