"""Figures for the chapters: matplotlib, axis labels with units, a colour-blind-safe palette.

Importing this module applies the book's style once (`use_book_style`): font sizes that stay at
least 9 px tall in the book's ~700 px column, and SVG output in Jupyter, with text drawn as paths.
"""
from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.text

from zerobook import memory

COLUMN_PX = 700  # the book's text column at a 1400 px window (CSS px); a wider figure is shrunk to it
CSS_PX_PER_INCH = 96  # an SVG of w inches (72w pt) is drawn 96w CSS px wide
BOOK_STYLE = {
    "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "xtick.labelsize": 9,
    "ytick.labelsize": 9, "legend.fontsize": 9, "legend.title_fontsize": 9, "figure.titlesize": 11,
    "figure.figsize": (7, 3.8), "figure.dpi": 100, "savefig.dpi": 200,
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
    width_in = fig.get_tightbbox(renderer).width + 2 * matplotlib.rcParams["savefig.pad_inches"]
    shown_px = min(column_px, width_in * CSS_PX_PER_INCH)
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
             if t.get_visible() and t.get_text().strip() and t.get_window_extent(renderer).width > 0]
    return min(sizes) / 72 * shown_px / width_in


use_book_style()

# Okabe & Ito's palette, safe for the common kinds of colour blindness.
PALETTE = {"blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "vermillion": "#D55E00",
           "purple": "#CC79A7", "sky": "#56B4E9", "yellow": "#F0E442", "black": "#000000"}
STAGE_COLORS = [PALETTE["black"], PALETTE["blue"], PALETTE["orange"], PALETTE["green"]]


def max_model_size_chart(devices_gb=(80, 32), world_sizes=tuple(2**k for k in range(11))):
    """Largest model whose model states fit, vs GPUs: flat for DDP, linear for ZeRO-3."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for device_gb, style in zip(devices_gb, ("-", "--")):
        for stage in memory.STAGES:
            sizes = [memory.max_model_params(device_gb * memory.GB, stage=stage, world_size=n)
                     for n in world_sizes]
            ax.plot(world_sizes, sizes, style, color=STAGE_COLORS[stage], marker="o", markersize=3,
                    label=f"{memory.STAGE_NAMES[stage]}, {device_gb} GB")
    ax.set(xscale="log", yscale="log", xlabel="GPUs (data-parallel degree N)",
           ylabel="largest model (parameters)",
           title="Model states only (16 bytes/parameter), no activations")
    ax.set_xticks(world_sizes, [str(n) for n in world_sizes])
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.15), frameon=False)  # below: no line there
    return fig


def redundancy_chart(num_params: float = 1e9, world_size: int = 16):
    """What N DDP replicas hold in all vs what is distinct: N x 16Ψ bytes for 16Ψ of information."""
    per_gpu = memory.model_state_bytes(num_params, stage=0, world_size=world_size)
    fig, (left, right) = plt.subplots(1, 2, figsize=(7, 3.4), gridspec_kw={"width_ratios": [3, 1.2]})
    kinds = (("params", PALETTE["blue"]), ("grads", PALETTE["orange"]), ("optimizer", PALETTE["green"]))
    bottom = [0.0] * world_size
    for kind, color in kinds:
        heights = [getattr(per_gpu, kind) / memory.GB] * world_size
        left.bar(range(world_size), heights, bottom=bottom, color=color, label=kind)
        bottom = [b + h for b, h in zip(bottom, heights)]
    left.set(xlabel="GPU (rank)", ylabel="model states held (GB)", ylim=(0, 1.3 * max(bottom)),
             title=f"DDP: every GPU holds the same {per_gpu.total / memory.GB:g} GB")
    left.legend(loc="upper center", ncol=3, frameon=False)  # in the headroom above the bars
    held, distinct = world_size * per_gpu.total / memory.GB, per_gpu.total / memory.GB
    bars = right.bar(["held", "distinct"], [held, distinct], color=[PALETTE["vermillion"], PALETTE["sky"]])
    right.bar_label(bars, labels=[f"{held:g} GB", f"{distinct:g} GB"])
    right.set(ylabel="GB across the cluster", title="across the cluster", ylim=(0, 1.15 * held))
    fig.tight_layout()
    return fig


def traffic_chart(size_bytes: float = 1e9, world_sizes=tuple(range(2, 65))):
    """Bytes moved per all-reduce of S bytes: at a parameter server, per worker, per ring rank."""
    from zerobook import traffic

    server = [traffic.parameter_server_bytes(size_bytes, n)["server"] / memory.GB for n in world_sizes]
    worker = [traffic.parameter_server_bytes(size_bytes, n)["per_worker"] / memory.GB for n in world_sizes]
    ring = [traffic.ring_all_reduce_bytes(size_bytes, n) / memory.GB for n in world_sizes]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(world_sizes, server, color=PALETTE["vermillion"], label="parameter server: received at the server")
    ax.plot(world_sizes, worker, "--", color=PALETTE["orange"], label="parameter server: sent per worker")
    ax.plot(world_sizes, ring, color=PALETTE["blue"], label="ring all-reduce: sent per rank")
    ax.set(xlabel="workers N", ylabel="GB per all-reduce, one direction",
           yscale="log", title=f"All-reducing S = {size_bytes / memory.GB:g} GB of gradients")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def ring_steps_chart(traces: list[list[dict]]):
    """Small multiples, one per ring step: which ranks' contributions each chunk holds, per rank.

    traces[r] is rank r's trace from `ring_all_reduce(..., trace=...)` with rank k contributing
    2**k, so a chunk's value lists its contributors as set bits. Four panels a row.
    """
    world_size, steps = len(traces), len(traces[0])
    initial = [[2**r] * world_size for r in range(world_size)]
    grids = [initial] + [[traces[r][s]["holding"] for r in range(world_size)] for s in range(steps)]
    titles = ["start"] + [f"{t['phase']} {t['step'] + 1}" for t in traces[0]]
    cols = min(4, len(grids))
    rows = -(-len(grids) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7, 1.95 * rows + 0.3), squeeze=False)
    for ax, grid, title in zip(axes.flat, grids, titles):
        ring_grid(ax, grid)
        ax.set_title(title)
    for ax in axes.flat[len(grids):]:
        ax.axis("off")
    axes.flat[-1].text(0, 0.5, "each cell: the ranks\nwhose contributions\nthat chunk holds", va="center",
                       transform=axes.flat[-1].transAxes)
    for row in axes:
        row[0].set_ylabel("rank")
    axes[-1][0].set_xlabel("chunk")
    fig.tight_layout()
    return fig


def ring_grid(ax, grid) -> None:
    """One step: a rank x chunk grid, each cell naming the ranks whose contributions it holds."""
    world_size = len(grid)
    counts = [[bin(int(v)).count("1") for v in row] for row in grid]
    ax.pcolormesh(counts, cmap="Blues", vmin=0, vmax=world_size, edgecolors="white", linewidth=1)
    for r, row in enumerate(grid):
        for c, value in enumerate(row):
            members = "".join(str(k) for k in range(world_size) if int(value) >> k & 1)
            members = "all" if len(members) == world_size > 2 else members
            ax.text(c + 0.5, r + 0.5, members, ha="center", va="center", fontsize=9,
                    color="white" if counts[r][c] > world_size / 2 else "black")
    ax.set(xticks=[c + 0.5 for c in range(world_size)], yticks=[r + 0.5 for r in range(world_size)],
           xticklabels=range(world_size), yticklabels=range(world_size), aspect="equal")
    ax.invert_yaxis()
    ax.tick_params(length=0)


def bandwidth_chart(rows: list[dict], fits: dict):
    """Measured busbw against message size, per implementation and N, with the fitted α-β model."""
    from zerobook import traffic

    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {"ring": PALETTE["blue"], "builtin": PALETTE["vermillion"]}
    for (impl, n), fit in fits.items():
        mine = [r for r in rows if r["impl"] == impl and r["world_size"] == n]
        sizes = [r["bytes"] for r in mine]
        busbw = [traffic.bandwidth(r["bytes"], r["seconds"], "all_reduce", n)["busbw"] / 1e9 for r in mine]
        model = [traffic.bandwidth(s, traffic.predicted_seconds(fit, s), "all_reduce", n)["busbw"] / 1e9
                 for s in sizes]
        style = "-" if n == max(k[1] for k in fits) else "--"
        ax.plot(sizes, busbw, style, marker="o", markersize=3, color=colors[impl], label=f"{impl}, N = {n}")
        ax.plot(sizes, model, ":", color=colors[impl], alpha=0.6)
    ax.set(xscale="log", xlabel="message size S (bytes)", ylabel="bus bandwidth (GB/s, 10^9 B/s)",
           title="All-reduce bus bandwidth: measured (markers) and α-β model (dotted)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def gradient_bytes_chart(held: dict[str, list[int]], lines: dict[str, float], title: str):
    """Gradient bytes a rank holds after each gradient arrives in backward, one curve per method,
    with horizontal reference lines (e.g. the calculator's 2Ψ and 2Ψ/N); bytes shown in KiB."""
    colors = [PALETTE["black"], PALETTE["blue"], PALETTE["orange"], PALETTE["green"], PALETTE["purple"]]
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for (label, values), color in zip(held.items(), colors):
        ax.step(range(1, len(values) + 1), [v / 1024 for v in values], where="post", color=color, label=label)
    reference_lines(ax, {label: value / 1024 for label, value in lines.items()})
    ax.set(xlabel="gradients produced so far in the step (parameter tensors, all micro-batches)",
           ylabel="gradient bytes held (KiB)", title=title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    fig.tight_layout()
    return fig


def reference_lines(ax, lines: dict[str, float]) -> None:
    """Grey horizontal lines (label -> y), each labelled just right of the axes, where no curve
    crosses its label."""
    for (label, y), style in zip(lines.items(), [":", "-.", "--", (0, (1, 3))]):
        ax.axhline(y, linestyle=style, color="grey", linewidth=1)
        ax.annotate(label, xy=(1, y), xycoords=("axes fraction", "data"), xytext=(4, 0),
                    textcoords="offset points", va="center", color="dimgrey")


def timeline_chart(runs: dict[str, list]):
    """One Gantt chart per run (name -> events): communication and computation lanes, in ms."""
    from zerobook.zero.timeline import timeline_bars  # here: its package imports torch

    fig, axes = plt.subplots(len(runs), 1, sharex=True, figsize=(7.2, 1.5 * len(runs) + 0.7), squeeze=False)
    for ax, (name, events) in zip(axes[:, 0], runs.items()):
        gantt(ax, timeline_bars(events))
        ax.set_title(name)
    axes[-1, 0].set_xlabel("time since the step began (ms)")
    fig.tight_layout()
    return fig


def gathered_bytes_chart(runs: dict[str, list], lines: dict[str, float], kept: int = 0):
    """Bytes of full (gathered) parameters over one step, per run (name -> events), in KiB, on
    top of `kept` (the shards a rank keeps between steps); `lines`: label -> bytes, drawn across."""
    from zerobook.zero.timeline import events_from  # here: its package imports torch

    colors = [PALETTE["black"], PALETTE["blue"], PALETTE["orange"], PALETTE["green"]]
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    for (name, events), color in zip(runs.items(), colors):
        events = events_from(events)
        ax.step([e.t * 1e3 for e in events], [(kept + e.gathered) / 1024 for e in events], where="post",
                color=color, label=name)
    reference_lines(ax, {label: value / 1024 for label, value in lines.items()})
    what = "shards kept + full parameters gathered" if kept else "full parameters allocated"
    ax.set(xlabel="time since the step began (ms)", ylabel=f"{what} (KiB)",
           title="Model-state bytes on rank 0 through one step" if kept else "Gathered parameters on rank 0 through one step")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=len(runs))  # below: no curve there
    return fig


def scaling_chart(num_params: float, world_sizes, measured: dict[int, float]):
    """Model-state bytes per GPU against N for each ZeRO stage (the calculator), with measured
    bytes per rank (N -> bytes, scaled to `num_params`) drawn as points on the ZeRO-3 line."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for stage in memory.STAGES:
        per_gpu = [memory.model_state_bytes(num_params, stage=stage, world_size=n).total / memory.GB
                   for n in world_sizes]
        ax.plot(world_sizes, per_gpu, color=STAGE_COLORS[stage], label=memory.STAGE_NAMES[stage])
    ax.plot(list(measured), [b / memory.GB for b in measured.values()], "o", color=PALETTE["vermillion"],
            label="ZeRO-3, measured here (bytes kept per rank, scaled)")
    ax.set(xscale="log", yscale="log", xlabel="GPUs (data-parallel degree N)",
           ylabel="model states per GPU (GB)", title=f"{num_params / 1e9:g}B parameters, mixed-precision AdamW")
    ax.set_xticks(list(world_sizes), [str(n) for n in world_sizes])
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def prediction_chart(predictions: dict):
    """One Gantt chart per predicted step (name -> zerobook.perfmodel.Prediction): its schedule's
    computation and communication, each in its lane (on a host without overlap both ran on one
    stream, one after the other), in ms; the computation's idle gaps are the exposed communication."""
    fig, axes = plt.subplots(len(predictions), 1, sharex=True, figsize=(7.2, 1.5 * len(predictions) + 0.7),
                             squeeze=False)
    for ax, (name, p) in zip(axes[:, 0], predictions.items()):
        gantt(ax, predicted_bars(p))
        ax.set_title(f"{name}: {p.step_s * 1e3:.0f} ms, {p.exposed_comm_s * 1e3:.0f} ms of it waiting")
    axes[-1, 0].set_xlabel("time since the step began (ms)")
    fig.tight_layout()
    return fig


def predicted_bars(prediction) -> list[tuple[str, float, float]]:
    """(lane, start, end) of each span of a predicted step: "computation", "communication", "replicas"."""
    from zerobook.perfmodel import COMPUTATIONS

    return [("computation" if s.what in COMPUTATIONS else "replicas" if s.stream == "replicas" else "communication",
             s.start, s.end) for s in prediction.timeline]


def gantt(ax, bars) -> None:
    """Bars (lane, start s, end s, ...) in their lanes, in ms (HSDP's all-reduce: "replicas", a third)."""
    lanes = {"computation": (PALETTE["blue"], 0), "communication": (PALETTE["orange"], 1), "replicas": (PALETTE["purple"], 2)}
    for lane, start, end, *_ in bars:
        color, y = lanes[lane]
        ax.broken_barh([(start * 1e3, (end - start) * 1e3)], (y + 0.1, 0.8), color=color, edgecolor="white", linewidth=0.3)
    shown = [lane for lane in lanes if lane != "replicas" or any(b[0] == lane for b in bars)]
    ax.set(yticks=[lanes[lane][1] + 0.5 for lane in shown], yticklabels=[lane.replace("replicas", "all-reduce (replicas)") for lane in shown])
    ax.grid(True, axis="x", alpha=0.3)


def measured_beside_predicted(bars, prediction, label: str):
    """A step as timed here (zerobook.zero.timeline.timeline_bars: the blocks' gathers, computation
    and reduce-scatters) above the model's schedule of the same step, on one time axis (ms)."""
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7.2, 3.4))
    gantt(top, bars)
    first, last = min(b[1] for b in bars), max(b[2] for b in bars)
    top.set_title(f"measured ({label}): blocks from the first gather to the last reduce, {(last - first) * 1e3:.0f} ms")
    gantt(bottom, predicted_bars(prediction))
    bottom.set_title(f"predicted: the whole step (root and optimizer too), {prediction.step_s * 1e3:.0f} ms")
    bottom.set_xlabel("time since the step began (ms)")
    fig.tight_layout()
    return fig
