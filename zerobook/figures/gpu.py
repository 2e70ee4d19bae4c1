"""Figures drawn from a saved GPU record (zerobook.pages.gpu_record): what only a GPU measured.

fig = offload_memory_chart(record.section("offload")["16"])
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.figures.style import PALETTE, reference_lines

MiB, GiB = 2**20, 2**30


def offload_memory_chart(report: dict, configs=("offload", "prefetch")):
    """The CUDA allocator's record of one forward + backward per config: bytes of the units'
    device copies (top, MiB, with one and two units drawn across) and all bytes allocated above
    the step's lowest point (bottom, GiB), against the host's clock at each allocation or free
    (ms since the first: when the CPU asked, ahead of the GPU's work)."""
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 5.2))
    unit = max(next(iter(report["runs"][c]["unit_bytes"].values())) for c in configs)
    for config, color in zip(configs, (PALETTE["black"], PALETTE["blue"])):
        memory = report["runs"][config]["memory"]
        ms = [t / 1e3 for t in memory["t_us"]]
        top.step(
            ms,
            [b / MiB for b in memory["units"]],
            where="post",
            color=color,
            label=config,
        )
        low = min(
            memory["allocated"]
        )  # frees deferred from the step before start below the base
        bottom.step(
            ms,
            [(b - low) / GiB for b in memory["allocated"]],
            where="post",
            color=color,
            label=config,
        )
    reference_lines(top, {"one unit": unit / MiB, "two units": 2 * unit / MiB})
    top.set(
        ylabel="units' device copies (MiB)",
        title="One forward + backward, as the CUDA allocator recorded it",
    )
    bottom.set(
        xlabel="host time of each allocation and free (ms since the step's first)",
        ylabel="allocated above the low (GiB)",
    )
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    bottom.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=len(configs))
    fig.tight_layout()
    return fig
