"""Where ZeRO-3 alone ends, drawn: the least global batch that hides ZeRO-3's traffic (T* x N)
against the number of GPUs, beside the batches published pre-training runs used
(zerobook.perfmodel.critical_batch; chapters/scaling_out).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.figures.style import PALETTE

LINE_COLORS = (PALETTE["blue"], PALETTE["vermillion"], PALETTE["black"])


def global_batch_chart(gpus, lines: dict, batches, crossings: dict, title: str):
    """`lines` (label -> tokens a step at each of `gpus`) on log-log axes; each published batch
    (PublishedBatch) a dotted horizontal line, named at the left; `crossings` (run -> N) marked
    where the fp32 line reaches that run's batch. The axes keep the data: tests read it back."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for (label, tokens), color in zip(lines.items(), LINE_COLORS):
        dashed = "sequence" in label
        ax.plot(gpus, tokens, marker="" if dashed else "o", markersize=4,
                linestyle="--" if dashed else "-", color=color, label=label)  # fmt: skip
    for i, batch in enumerate(sorted(batches, key=lambda b: b.tokens)):
        below = i == 0  # the lowest two lie close: name the lower one under its line
        ax.axhline(batch.tokens, color="gray", linestyle=":", linewidth=1)
        ax.text(gpus[0], batch.tokens * (0.93 if below else 1.07),
                f"{batch.run}: {batch.stated}", fontsize=9, color="dimgray",
                va="top" if below else "bottom")  # fmt: skip
        n = crossings.get(batch.run)
        if n:
            ax.plot([n], [batch.tokens], marker="D", color=PALETTE["vermillion"],
                    markersize=6, linestyle="")  # fmt: skip
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="GPUs, N (8 per node)",
        ylabel="tokens per optimizer step",
        title=title,
    )
    ax.set_xticks(gpus[::2], [f"{n:,}" for n in gpus[::2]])
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig
