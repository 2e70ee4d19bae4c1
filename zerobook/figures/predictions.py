"""The performance model's predicted steps drawn (zerobook.perfmodel.Prediction): each schedule's
computation and communication in their lanes, and a step timed here above the model's.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.figures.style import gantt


def prediction_chart(predictions: dict):
    """One Gantt chart per predicted step (name -> zerobook.perfmodel.Prediction): its schedule's
    computation and communication, each in its lane (on a host without overlap both ran on one
    stream, one after the other), in ms; the computation's idle gaps are the exposed communication."""
    fig, axes = plt.subplots(
        len(predictions),
        1,
        sharex=True,
        figsize=(7.2, 1.5 * len(predictions) + 0.7),
        squeeze=False,
    )
    for ax, (name, p) in zip(axes[:, 0], predictions.items()):
        gantt(ax, predicted_bars(p))
        ax.set_title(
            f"{name}: {p.step_s * 1e3:.0f} ms, {p.exposed_comm_s * 1e3:.0f} ms of it waiting"
        )
    axes[-1, 0].set_xlabel("time since the step began (ms)")
    fig.tight_layout()
    return fig


def predicted_bars(prediction) -> list[tuple[str, float, float]]:
    """(lane, start, end) of each span of a predicted step: "computation", "communication", "replicas"."""
    from zerobook.perfmodel import COMPUTATIONS

    return [
        (
            "computation"
            if s.what in COMPUTATIONS
            else "replicas"
            if s.stream == "replicas"
            else "communication",
            s.start,
            s.end,
        )
        for s in prediction.timeline
    ]


def measured_beside_predicted(bars, prediction, label: str):
    """A step as timed here (zerobook.zero.timeline.timeline_bars: the blocks' gathers, computation
    and reduce-scatters) above the model's schedule of the same step, on one time axis (ms)."""
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7.2, 3.4))
    gantt(top, bars)
    first, last = min(b[1] for b in bars), max(b[2] for b in bars)
    top.set_title(
        f"measured ({label}): blocks from the first gather to the last reduce, {(last - first) * 1e3:.0f} ms"
    )
    gantt(bottom, predicted_bars(prediction))
    bottom.set_title(
        f"predicted: the whole step (root and optimizer too), {prediction.step_s * 1e3:.0f} ms"
    )
    bottom.set_xlabel("time since the step began (ms)")
    fig.tight_layout()
    return fig
