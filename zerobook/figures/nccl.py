"""An all-reduce's bus bandwidth against its size, for each algorithm and protocol NCCL weighs,
priced by zerobook.perfmodel.collectives (NCCL's tuning model), with the one NCCL picks drawn
over them (chapters/nccl_collectives).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import matplotlib.ticker

from zerobook.figures.style import PALETTE
from zerobook.perfmodel.collectives import (
    PROTOCOLS,
    in_network,
    nccl_choice,
    ring,
    tree,
)

ALGORITHM_COLORS = {
    "ring": PALETTE["blue"],
    "tree": PALETTE["orange"],
    "nvls": PALETTE["green"],
    "nvls_tree": PALETTE["green"],
    "collnet": PALETTE["purple"],
}
PROTOCOL_STYLES = {"LL": ":", "LL128": "--", "Simple": "-"}
NAMES = {"nvls": "NVLS", "nvls_tree": "NVLS + tree", "collnet": "CollNet"}


def all_reduce_candidates(size: float, n: int, k: int, hardware) -> dict:
    """(algorithm, protocol) -> seconds of an all-reduce of `size` bytes over `n` ranks, `k` in
    each node: every candidate NCCL's tuner weighs (nccl_choice picks the fastest of them)."""
    out = {}
    for p, protocol in enumerate(PROTOCOLS):
        out["ring", protocol] = ring("all_reduce", size, n, k, hardware, p)
        out["tree", protocol] = tree(size, n, k, hardware, p)
    out |= {(name, "Simple"): s for name, s in in_network(size, n, k, hardware)}
    return out


def bus_gbps(size: float, seconds: float, n: int) -> float:
    """nccl-tests' all-reduce busbw, GB/s: 2 (n-1)/n of the buffer over the time."""
    return 2 * (n - 1) / n * size / seconds / 1e9


def busbw_panel(ax, hardware, n: int, k: int, sizes) -> dict:
    """One layout's candidates (thin) and NCCL's pick (black dots) on `ax`; returns the picks
    by size: (algorithm, protocol, seconds)."""
    curves = {}
    for size in sizes:
        for key, seconds in all_reduce_candidates(size, n, k, hardware).items():
            curves.setdefault(key, []).append(bus_gbps(size, seconds, n))
    for (algorithm, protocol), gbps in curves.items():
        ax.plot(
            sizes,
            gbps,
            color=ALGORITHM_COLORS[algorithm],
            linestyle=PROTOCOL_STYLES[protocol],
            linewidth=1.2,
            label=f"{NAMES.get(algorithm, algorithm)} {protocol}",
        )
    picks = {
        s: nccl_choice(
            "all_reduce", s, world_size=n, gpus_per_node=k, hardware=hardware
        )
        for s in sizes
    }
    ax.plot(
        sizes,
        [bus_gbps(s, picks[s][2], n) for s in sizes],
        "o",
        color=PALETTE["black"],
        markersize=3,
        label="NCCL's pick",
    )
    ax.set(xscale="log", yscale="log", xlabel="all-reduce size (bytes)")
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2**10))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(size_label))
    ax.grid(True, alpha=0.3)
    return picks


def size_label(value: float, _=None) -> str:
    """1 KiB, 1 MiB, 1 GiB for the powers of 2**10 on the axis."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} B"


def busbw_chart(hardware, layouts, sizes):
    """A panel per (title, n, k) of `layouts`: each candidate's busbw against size, NCCL's
    pick marked; one legend below. Returns (figure, picks by layout title)."""
    fig, axes = plt.subplots(
        1, len(layouts), figsize=(7, 3.9), sharey=True, squeeze=False
    )
    picks = {}
    for ax, (title, n, k) in zip(axes[0], layouts):
        picks[title] = busbw_panel(ax, hardware, n, k, sizes)
        ax.set_title(title)
    axes[0, 0].set_ylabel("bus bandwidth (GB/s)")
    handles = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    labels = list(handles)
    fig.legend(
        [handles[label] for label in labels],
        labels,
        loc="lower center",
        ncol=4,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.19, 1, 1))
    return fig, picks
