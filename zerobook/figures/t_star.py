"""T*, the tokens per GPU per step that hide ZeRO-3's traffic, drawn: the share of a predicted
step spent waiting against tokens per GPU, and T* against the number of GPUs
(chapters/when_zero_pays, chapters/zero_pays_further).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.figures.style import PALETTE


def waiting_share_chart(tokens_per_gpu, predictions, t_star: float, title: str):
    """The share of each predicted step (zerobook.perfmodel.Prediction) spent waiting for
    communication against its tokens per GPU (log scale), T* dashed."""
    share = [p.exposed_comm_s / p.step_s for p in predictions]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot(tokens_per_gpu, share, marker="o", color=PALETTE["vermillion"])
    ax.axvline(t_star, color="gray", linestyle="--", label=f"T* = {t_star:,.0f}")
    ax.set(
        xscale="log",
        xlabel="tokens per GPU per step",
        ylabel="share of the step spent waiting",
        title=title,
    )
    ax.legend()
    fig.tight_layout()
    return fig


def t_star_against_gpus_chart(gpus, lines: dict, title: str):
    """T* (label -> a value for each of `gpus`) against the number of GPUs, log scale."""
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for label, stars in lines.items():
        ax.plot(gpus, stars, marker="o", label=label)
    ax.set(
        xscale="log",
        xlabel="GPUs (8 per node)",
        ylabel="T*, tokens per GPU per step",
        title=title,
    )
    ax.set_xticks(gpus, [str(n) for n in gpus])
    ax.set_ylim(0)
    ax.legend()
    fig.tight_layout()
    return fig
