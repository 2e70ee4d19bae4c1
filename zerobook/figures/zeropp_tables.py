"""The ZeRO++ chapter's tables: a metered run's collectives by group, and the published runs of
DeepSpeed's ZeRO++ blog against the network's bound.

    collective_rows(sent, way)       (way, "all-gather over (0, 1)", calls, bytes) per collective
    span(values, form)               "low–high" of formatted values, one value if they agree
    blog_table(runs, bound)          the blog's TFLOPs of each way against its bound, as a table

Notebook side; no torch.
"""

from __future__ import annotations

from zerobook.figures.widgets import html_table

NAMES = {
    "all_gather_into_tensor": "all-gather",
    "reduce_scatter_tensor": "reduce-scatter",
    "all_to_all_single": "all-to-all",
}


def collective_label(op: str) -> str:
    """A meter's key as words: "all_gather_into_tensor over (0, 1)" -> "all-gather over (0, 1)"."""
    name, *group = op.split(" over")
    return " over".join([NAMES[name], *group])


def collective_rows(sent: dict, way: str, skip: str = "") -> list[tuple]:
    """One row per metered collective (CommMeter.summary(by_group=True)), bytes with commas;
    collectives whose key starts with `skip` (when given) left out."""
    return [
        (way, collective_label(op), s["calls"], f"{s['bus_bytes']:,.0f}")
        for op, s in sent.items()
        if not (skip and op.startswith(skip))
    ]


def span(values, form: str = "{:.0f}") -> str:
    """The smallest and largest value formatted, "low–high", or one value if they read alike."""
    low, high = form.format(min(values)), form.format(max(values))
    return low if low == high else f"{low}–{high}"


def blog_table(runs: dict, bound) -> object:
    """runs: {(Gb/s, tokens per GPU): {model: (ZeRO-3 TFLOPs, ZeRO++ TFLOPs)}}; bound(gbps,
    tokens, bytes per parameter) the network's cap (6 bytes for ZeRO-3, 1.5 for ZeRO++). A row
    per setting: each way's TFLOPs of its cap (the fraction), and ZeRO++'s speed-up."""
    rows = []
    for (gbps, tokens), models in runs.items():
        caps = (bound(gbps, tokens, 6.0), bound(gbps, tokens, 1.5))
        entries = [
            f"{span([t[way] for t in models.values()])} of {caps[way]:.0f} "
            f"({span([t[way] / caps[way] for t in models.values()], '{:.0%}')})"
            for way in (0, 1)
        ]
        gain = span([zpp / z3 for z3, zpp in models.values()], "{:.2f}")
        rows.append((f"{gbps} Gb/s, {tokens // 1024}K", *entries, gain))
    headers = ["links, tokens/GPU", "ZeRO-3: TFLOPs of bound",
               "ZeRO++: TFLOPs of bound", "speed-up"]  # fmt: skip
    caption = "the blog's 384 V100s against the network's bound (computed here)"
    return html_table(headers, rows, caption=caption)
