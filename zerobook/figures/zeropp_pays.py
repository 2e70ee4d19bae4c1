"""Where qwZ pays (chapters/zeropp): the rate at which each GPU receives in a flat ring across
nodes (zerobook.perfmodel.collectives.bus_bandwidth), one bar per NIC count a node, against qwZ's
break-even with its passes as measured and with DeepSpeed's fused kernels at their bound
(zerobook.perfmodel.zeropp.break_even_bandwidth). Below a line qwZ's gather ends sooner.

    edge, receives = break_evens(H100_NODE)
    break_even_chart(edge, receives, "64 H100s")
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.figures import style  # noqa: F401 - the book's figure style
from zerobook.perfmodel.collectives import bus_bandwidth
from zerobook.perfmodel.zeropp import break_even_bandwidth

QUANTIZER_LABELS = {
    "unfused": "break-even, passes as measured",
    "fused": "break-even, DeepSpeed's fused kernels (a bound)",
}


def break_evens(hardware, world_size: int = 64, nics=(1, 2, 4, 8)) -> tuple[dict, dict]:
    """({quantizer: break-even bytes/s}, {NICs a node: bytes/s each GPU receives at}) for a
    ring of `world_size` GPUs in `hardware`'s nodes."""
    g = hardware.gpus_per_node
    edge = {q: break_even_bandwidth(world_size, hardware, q) for q in QUANTIZER_LABELS}
    receives = {
        k: bus_bandwidth(world_size, g, hardware.with_(nics_per_node=k)) for k in nics
    }
    return edge, receives


def break_even_chart(edge: dict, receives: dict, label: str):
    """Bars: GB/s each GPU receives at, per NIC count; lines: the break-evens."""
    fig, ax = plt.subplots(figsize=(6.5, 3))
    names = [f"{k} NIC{'s' if k > 1 else ''}" for k in receives]
    rates = [r / 1e9 for r in receives.values()]
    colors = ["C2" if r < edge["unfused"] / 1e9 else "C7" for r in rates]
    bars = ax.bar(names, rates, color=colors, width=0.6)
    ax.bar_label(bars, fmt="%.0f", fontsize=9)
    for (q, text), dash in zip(QUANTIZER_LABELS.items(), ("-", "--")):
        ax.axhline(edge[q] / 1e9, color="C3", linestyle=dash, linewidth=1.5,
                   label=f"{text}: {edge[q] / 1e9:.0f}")  # fmt: skip
    ax.legend(loc="upper left")
    ax.set(
        ylabel="GB/s each GPU receives",
        xlabel="NICs a node (ring across nodes)",
        title=f"qwZ pays below a line ({label}; green: below the measured one)",
    )
    ax.set_ylim(0, 1.45 * max(max(rates), *(e / 1e9 for e in edge.values())))
    fig.tight_layout()
    return fig
