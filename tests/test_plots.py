"""Every chart the chapters draw: axes labelled (with units where there is a quantity), colours
from the colour-blind-safe palette."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as mcolors  # noqa: E402
import pytest  # noqa: E402

from zerobook.figures import charts, ring, style, timelines  # noqa: E402
from zerobook.zero.timeline import Event  # noqa: E402

EVENTS = [
    Event(0.000, "gather", "blocks.0", 10),
    Event(0.001, "compute", "blocks.0", 10),
    Event(0.003, "computed", "blocks.0", 0),
    Event(0.004, "gather (backward)", "blocks.0", 10),
    Event(0.005, "backward", "blocks.0", 10),
    Event(0.007, "reduce-scatter", "blocks.0", 10),
    Event(0.008, "reduced", "blocks.0", 0),
]


def ring_trace(world_size: int) -> list[list[dict]]:
    """What ring_all_reduce's trace records, simulated on bit masks: rank k contributes 2**k, and
    at step s rank r passes chunk (r - s) mod N (reduce-scatter: added; all-gather: copied)."""
    holding = [[2**r] * world_size for r in range(world_size)]
    traces = [[] for _ in range(world_size)]
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(world_size - 1):
            shift = step if phase == "reduce-scatter" else step - 1
            sent = [
                (r, (r - shift) % world_size, holding[r][(r - shift) % world_size])
                for r in range(world_size)
            ]
            for r, chunk, value in sent:
                to = (r + 1) % world_size
                holding[to][chunk] = (
                    holding[to][chunk] | value if phase == "reduce-scatter" else value
                )
            for r in range(world_size):
                traces[r].append(
                    {"phase": phase, "step": step, "holding": list(holding[r])}
                )
    return traces


TRACE = ring_trace(4)
ROWS = [
    {"impl": "ring", "world_size": 2, "bytes": b, "seconds": 1e-4 + b / 1e9}
    for b in (1e3, 1e5, 1e7)
]

CHARTS = {
    "max_model_size": lambda: charts.max_model_size_chart(),
    "redundancy": lambda: charts.redundancy_chart(),
    "traffic": lambda: charts.traffic_chart(),
    "ring_steps": lambda: ring.ring_steps_chart(TRACE),
    "bandwidth": lambda: ring.bandwidth_chart(
        ROWS, {("ring", 2): {"intercept": 1e-4, "slope": 1e-9}}
    ),
    "gradient_bytes": lambda: charts.gradient_bytes_chart(
        {"ddp": [1, 2, 3]}, {"2Ψ": 3}, "title"
    ),
    "timeline": lambda: timelines.timeline_chart({"no prefetch": EVENTS}),
    "gathered_bytes": lambda: timelines.gathered_bytes_chart(
        {"no prefetch": EVENTS}, {"16Ψ/N": 5}, kept=5
    ),
    "scaling": lambda: charts.scaling_chart(7.5e9, [1, 2, 4], {2: 60e9}),
}
UNITS = ("(GB", "(KiB", "(ms", "(bytes", "(parameters", "GB ")
GREYS = {"grey", "dimgrey", "white"}


@pytest.mark.parametrize("name", CHARTS)
def test_every_chart_has_labelled_axes_with_units(name):
    fig = CHARTS[name]()
    labelled = [
        ax
        for ax in fig.axes
        if ax.get_xlabel() and (ax.get_ylabel() or ax.get_yticklabels())
    ]
    assert labelled, f"{name}: no axes with both labels"
    quantities = [
        label
        for ax in fig.axes
        for label in (ax.get_xlabel(), ax.get_ylabel())
        if label
        and label not in ("rank", "chunk", "GPU (rank)", "workers N")
        and not label.startswith(("GPUs", "gradients produced"))
    ]
    assert all(any(unit in label for unit in UNITS) for label in quantities), quantities


@pytest.mark.parametrize("name", CHARTS)
def test_every_chart_draws_in_the_palette(name):
    fig = CHARTS[name]()
    allowed = {mcolors.to_hex(c) for c in style.PALETTE.values()} | {
        mcolors.to_hex(g) for g in GREYS
    }
    used = {
        mcolors.to_hex(line.get_color()) for ax in fig.axes for line in ax.get_lines()
    }
    used |= {mcolors.to_hex(p.get_facecolor()) for ax in fig.axes for p in ax.patches}
    used |= {
        mcolors.to_hex(c)
        for ax in fig.axes
        for coll in ax.collections
        for c in coll.get_facecolor()
        if coll.get_array() is None
    }  # a colour-mapped grid (a sequential scale) aside
    assert used <= allowed, used - allowed


@pytest.mark.parametrize("name", CHARTS)
def test_every_chart_is_legible_in_the_books_column(name):
    """No text under 9 CSS px where the book shows the figure (column ~700 px, SVG 96 px/in)."""
    assert style.rendered_text_px(CHARTS[name]()) >= 9


def test_a_wide_figure_is_shrunk_to_the_column_and_its_text_with_it():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(14, 3))
    ax.set_title("title", fontsize=9)
    ax.tick_params(labelsize=9)
    width_in = fig.get_tightbbox(fig.canvas.get_renderer()).width + 0.2
    assert style.rendered_text_px(fig) == pytest.approx(
        9 / 72 * style.COLUMN_PX / width_in
    )
    assert style.rendered_text_px(fig) < 9  # what the old ring chart did to its digits
    narrow, ax = plt.subplots(figsize=(5, 3))
    ax.set_title("title", fontsize=9)
    assert style.rendered_text_px(narrow) == pytest.approx(
        9 * style.CSS_PX_PER_INCH / 72
    )
