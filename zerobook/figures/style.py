"""The book's figure style: font sizes that stay at least 9 px tall in the book's ~700 px column,
SVG output in Jupyter with text drawn as paths, a colour-blind-safe palette, and the pieces every
chart draws with (reference lines, Gantt lanes).

Importing this module (every chart module does) applies the style once (`use_book_style`).
"""

from __future__ import annotations

import matplotlib
import matplotlib.text

COLUMN_PX = 700  # the book's text column at a 1400 px window (CSS px); a wider figure is shrunk to it

CSS_PX_PER_INCH = 96  # an SVG of w inches (72w pt) is drawn 96w CSS px wide

BOOK_STYLE = {
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.title_fontsize": 9,
    "figure.titlesize": 11,
    "figure.figsize": (7, 3.8),
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "svg.fonttype": "path",  # glyphs as paths: drawn with the metrics they were laid out with
    "svg.hashsalt": "zerobook",  # the same figure gives the same SVG (stable cache and diffs)
}


def use_book_style() -> None:
    """Apply BOOK_STYLE and, inside IPython, ask the inline backend for SVG (vector, crisp at any
    zoom; JupyterLab, Colab and Jupyter Book all show it as an <img>)."""
    matplotlib.rcParams.update(BOOK_STYLE)
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None:
        set_matplotlib_formats("svg", metadata={"Date": None})


def rendered_text_px(fig, column_px: float = COLUMN_PX) -> float:
    """Height in CSS px of the figure's smallest text (its font size) as the book shows it: the
    SVG saved with bbox_inches="tight", drawn at its natural size or shrunk to the column."""
    renderer = fig.canvas.get_renderer()
    width_in = (
        fig.get_tightbbox(renderer).width
        + 2 * matplotlib.rcParams["savefig.pad_inches"]
    )
    shown_px = min(column_px, width_in * CSS_PX_PER_INCH)
    sizes = [
        t.get_fontsize()
        for t in fig.findobj(matplotlib.text.Text)
        if t.get_visible()
        and t.get_text().strip()
        and t.get_window_extent(renderer).width > 0
    ]
    return min(sizes) / 72 * shown_px / width_in


use_book_style()

# Okabe & Ito's palette, safe for the common kinds of colour blindness.
PALETTE = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "sky": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
}

STAGE_COLORS = [PALETTE["black"], PALETTE["blue"], PALETTE["orange"], PALETTE["green"]]


def reference_lines(ax, lines: dict[str, float]) -> None:
    """Grey horizontal lines (label -> y), each labelled just right of the axes, where no curve
    crosses its label."""
    for (label, y), style in zip(lines.items(), [":", "-.", "--", (0, (1, 3))]):
        ax.axhline(y, linestyle=style, color="grey", linewidth=1)
        ax.annotate(
            label,
            xy=(1, y),
            xycoords=("axes fraction", "data"),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            color="dimgrey",
        )


def gantt(ax, bars) -> None:
    """Bars (lane, start s, end s, ...) in their lanes, in ms (HSDP's all-reduce: "replicas", a third)."""
    lanes = {
        "computation": (PALETTE["blue"], 0),
        "communication": (PALETTE["orange"], 1),
        "replicas": (PALETTE["purple"], 2),
    }
    for lane, start, end, *_ in bars:
        color, y = lanes[lane]
        ax.broken_barh(
            [(start * 1e3, (end - start) * 1e3)],
            (y + 0.1, 0.8),
            color=color,
            edgecolor="white",
            linewidth=0.3,
        )
    shown = [
        lane for lane in lanes if lane != "replicas" or any(b[0] == lane for b in bars)
    ]
    ax.set(
        yticks=[lanes[lane][1] + 0.5 for lane in shown],
        yticklabels=[
            lane.replace("replicas", "all-reduce (replicas)") for lane in shown
        ],
    )
    ax.grid(True, axis="x", alpha=0.3)
