"""The capstone's figures (notebook side): its loss curves beside the n-gram baselines, and a
run killed and resumed against the run that was not. Style and palette: zerobook.figures.style."""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.figures.style import PALETTE

METHODS = {
    "ddp": ("your DDP", PALETTE["blue"], "-"),
    "zero3": ("your ZeRO-3", PALETTE["orange"], "-"),
    "fsdp2": ("PyTorch's FSDP2", PALETTE["green"], "--"),
}


def smoothed(curve: list[float], width: int = 25) -> list[float]:
    """The mean of each step's loss and the `width - 1` before it (fewer at the start)."""
    return [
        sum(curve[max(0, i - width + 1) : i + 1]) / (i + 1 - max(0, i - width + 1))
        for i in range(len(curve))
    ]


def curves_chart(report: dict):
    """Training loss (rank 0's rows, a running mean of 25 steps) of the three methods, their
    held-out bits per byte where each ended, and the unigram and bigram baselines."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for key, (label, color, style) in METHODS.items():
        run = report["runs"][key]
        ax.plot(smoothed(run["curve"]), color=color, linestyle=style, label=label)
        ax.plot(len(run["curve"]), run["held_out"], "o", color=color)
    end = max(len(run["curve"]) for run in report["runs"].values())
    for n, name in (("1", "unigram"), ("2", "bigram")):
        bits = report["baselines"][n]
        ax.axhline(bits, color=PALETTE["black"], linestyle=":", linewidth=1)
        ax.annotate(f"{name} {bits:.2f}", (0.6 * end, bits), ha="left", va="bottom")
    ax.set_xlabel("step")
    ax.set_ylabel("bits per byte")
    ax.set_title(
        "Training loss, running mean of 25 steps (your DDP under FSDP2's line)"
    )
    ax.legend(loc="upper right")
    return fig


def resume_chart(trained: dict, resumed: dict):
    """Rank 0's loss: the uninterrupted run, the first attempt until the kill, and the second
    attempt from the last committed checkpoint."""
    prefix, start = trained["prefix"], resumed["resumed_from"]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    whole = trained["runs"]["zero3"]["curve"][:prefix]
    ax.plot(whole, color=PALETTE["black"], linewidth=3, alpha=0.3, label="not killed")
    first = resumed["first_attempt"] or []
    ax.plot(first, color=PALETTE["vermillion"], label="attempt 1, killed")
    steps = range(start, start + len(resumed["curve"]))
    ax.plot(
        steps,
        resumed["curve"],
        color=PALETTE["blue"],
        linestyle="--",
        label="attempt 2",
    )
    ax.axvline(start, color=PALETTE["blue"], linestyle=":", linewidth=1)
    ax.axvline(
        resumed["kill_at"], color=PALETTE["vermillion"], linestyle=":", linewidth=1
    )
    ax.set_xlabel("step")
    ax.set_ylabel("loss, bits per byte")
    ax.set_title(
        f"Killed writing step {resumed['kill_at']}'s checkpoint, resumed from step {start}'s"
    )
    ax.legend(loc="upper right")
    return fig
