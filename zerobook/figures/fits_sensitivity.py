"""How sure "fits" is, drawn (chapters/when_zero_pays): for each case, the lowest ZeRO stage
whose step fits in the GPU's memory as the allocator's margin and the loss's bytes per logit
vary (the grids of zerobook.pages.zero_pays.stage_grids, from zerobook.perfmodel.peak_memory),
with the margins the measurements give marked.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.colors import ListedColormap

from zerobook.figures.style import PALETTE, STAGE_COLORS

NONE_FITS = "#dddddd"


def fits_sensitivity_chart(grids: dict, margins, logit_bytes, marks: dict):
    """One panel per case (title -> grid: the lowest stage that fits, None for none, for each
    of `logit_bytes` (rows) and `margins` (columns)): cells coloured and labelled with the
    stage ("-": none); `marks`: label -> margin, a marker each above every panel."""
    cmap = ListedColormap([NONE_FITS, *STAGE_COLORS])
    fig, axes = plt.subplots(len(grids), 1, figsize=(7, 1.55 * len(grids) + 0.9))
    step = margins[1] - margins[0]
    for ax, (title, grid) in zip(axes, grids.items()):
        codes = [[0 if s is None else s + 1 for s in row] for row in grid]
        ax.imshow(codes, cmap=cmap, vmin=0, vmax=4, aspect="auto", origin="lower")
        for i, row in enumerate(grid):
            for j, s in enumerate(row):
                light = s is None or s in (2, 3)
                ax.text(j, i, "-" if s is None else s, ha="center", va="center",
                        color="black" if light else "white", fontsize=9)  # fmt: skip
        for (label, m), marker in zip(marks.items(), "v^D"):
            ax.plot((m - margins[0]) / step, len(logit_bytes) - 0.05, marker=marker,
                    color=PALETTE["vermillion"], markersize=7, clip_on=False,
                    linestyle="none", label=label)  # fmt: skip
        ax.set_ylim(
            -0.5, len(logit_bytes) - 0.5
        )  # the markers sit just above the cells
        ax.set_yticks(range(len(logit_bytes)), [str(b) for b in logit_bytes])
        ax.set_xticks(range(len(margins))[::2], [f"{m:.0%}" for m in margins[::2]])
        ax.set_ylabel("bytes / logit")
        ax.set_title(title, loc="left", pad=11)
    axes[-1].set_xlabel("allocator margin (reserved beyond allocated)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.legend(
        *axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(marks)
    )
    return fig
