"""Every chart the chapters draw: axes labelled (with units where there is a quantity), colours
from the colour-blind-safe palette."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as mcolors  # noqa: E402
import pytest  # noqa: E402

from zerobook import plots  # noqa: E402
from zerobook.zero.timeline import Event  # noqa: E402

EVENTS = [Event(0.000, "gather", "blocks.0", 10), Event(0.001, "compute", "blocks.0", 10),
          Event(0.003, "computed", "blocks.0", 0), Event(0.004, "gather (backward)", "blocks.0", 10),
          Event(0.005, "backward", "blocks.0", 10), Event(0.007, "reduce-scatter", "blocks.0", 10),
          Event(0.008, "reduced", "blocks.0", 0)]
TRACE = [[{"phase": "reduce-scatter", "step": 0, "holding": [1, 3]}], [{"phase": "reduce-scatter", "step": 0, "holding": [3, 2]}]]
ROWS = [{"impl": "ring", "world_size": 2, "bytes": b, "seconds": 1e-4 + b / 1e9} for b in (1e3, 1e5, 1e7)]

CHARTS = {
    "max_model_size": lambda: plots.max_model_size_chart(),
    "redundancy": lambda: plots.redundancy_chart(),
    "traffic": lambda: plots.traffic_chart(),
    "ring_steps": lambda: plots.ring_steps_chart(TRACE),
    "bandwidth": lambda: plots.bandwidth_chart(ROWS, {("ring", 2): {"intercept": 1e-4, "slope": 1e-9}}),
    "gradient_bytes": lambda: plots.gradient_bytes_chart({"ddp": [1, 2, 3]}, {"2Ψ": 3}, "title"),
    "timeline": lambda: plots.timeline_chart({"no prefetch": EVENTS}),
    "gathered_bytes": lambda: plots.gathered_bytes_chart({"no prefetch": EVENTS}, {"16Ψ/N": 5}, kept=5),
    "scaling": lambda: plots.scaling_chart(7.5e9, [1, 2, 4], {2: 60e9}),
}
UNITS = ("(GB", "(KiB", "(ms", "(bytes", "(parameters", "GB ")
GREYS = {"grey", "dimgrey", "white"}


@pytest.mark.parametrize("name", CHARTS)
def test_every_chart_has_labelled_axes_with_units(name):
    fig = CHARTS[name]()
    labelled = [ax for ax in fig.axes if ax.get_xlabel() and (ax.get_ylabel() or ax.get_yticklabels())]
    assert labelled, f"{name}: no axes with both labels"
    quantities = [label for ax in fig.axes for label in (ax.get_xlabel(), ax.get_ylabel())
                  if label and label not in ("rank", "chunk", "GPU (rank)", "workers N")
                  and not label.startswith(("GPUs", "gradients produced"))]
    assert all(any(unit in label for unit in UNITS) for label in quantities), quantities


@pytest.mark.parametrize("name", CHARTS)
def test_every_chart_draws_in_the_palette(name):
    fig = CHARTS[name]()
    allowed = {mcolors.to_hex(c) for c in plots.PALETTE.values()} | {mcolors.to_hex(g) for g in GREYS}
    used = {mcolors.to_hex(line.get_color()) for ax in fig.axes for line in ax.get_lines()}
    used |= {mcolors.to_hex(p.get_facecolor()) for ax in fig.axes for p in ax.patches}
    used |= {mcolors.to_hex(c) for ax in fig.axes for coll in ax.collections for c in coll.get_facecolor()}
    assert used <= allowed, used - allowed
