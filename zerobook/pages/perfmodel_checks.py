"""The tables of the performance model's appendix (chapters/appendix_perfmodel): steps timed on
this machine against their predictions, one ZeRO-3 step's blocks against the schedule, and the
published measurements against the model. Notebook side.

    compared = compare_here(machine)      # the saved CPU run: (N, method) -> ratios
    here_table(compared, machine["date"])
    published_table(predict_all())
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zerobook.figures.widgets import html_table

PHASES = (
    "forward all-gather",
    "backward all-gather",
    "reduce-scatter",
    "forward",
    "backward",
)
UNITS = {"busbw": "GB/s busbw", "tokens": "tokens/s/GPU"}


@dataclass
class Compared:
    """The saved CPU run against the model: per (N, method) the measured step, the prediction
    told the buckets and gloo's reduce-scatter, and the naive one; gloo's measured ratio."""

    measured: dict = field(default_factory=dict)
    told: dict = field(default_factory=dict)
    naive: dict = field(default_factory=dict)
    gloo_rs: list = field(default_factory=list)

    def ratio(self, key, naive: bool = False) -> float:
        """Measured over predicted for (N, method)."""
        return self.measured[key] / (self.naive if naive else self.told)[key].step_s


def compare_here(machine: dict, course) -> Compared:
    """Every (N, method) of benchmarks/perfmodel.py's saved run, predicted from its own
    calibration, with and without the two facts of the software (naive=True)."""
    from zerobook.perfmodel.machine import RUNS, predict_runs

    out = Compared()
    for n, result in machine["results"].items():
        measured = result["measured"]
        calibration = measured["calibration"]
        out.gloo_rs.append(calibration["reduce_scatter_over_all_reduce"])
        told, naive = (
            predict_runs(calibration, course, batch=4, seq_len=128, naive=flag)
            for flag in (False, True)
        )
        for name, (run, key, *_) in RUNS.items():
            out.measured[n, name] = measured[run]["median"][key]
            out.told[n, name], out.naive[n, name] = told[name], naive[name]
    return out


def here_table(compared: Compared, date: str):
    """HTML: each (N, method)'s measured, predicted and naive step, ms, and the ratios."""
    rows = [
        (
            n,
            name,
            f"{seconds * 1e3:.0f}",
            f"{compared.told[n, name].step_s * 1e3:.0f}",
            f"{compared.ratio((n, name)):.2f}",
            f"{compared.naive[n, name].step_s * 1e3:.0f}",
            f"{compared.ratio((n, name), naive=True):.2f}",
        )
        for (n, name), seconds in compared.measured.items()
    ]
    headers = [
        "N",
        "method",
        "measured ms",
        "predicted ms",
        "ratio",
        "naive ms",
        "ratio",
    ]
    return html_table(
        headers,
        rows,
        caption=f"Steps timed here (gloo, CPU) on {date}: medians of interleaved rounds; "
        "ratio: measured / predicted",
    )


def block_durations(bars, prediction) -> tuple[dict, dict]:
    """Per phase (PHASES), each block's (unit, seconds): as the events timed them (bars in
    order: gather, forward, gather, backward, reduce), and as the model scheduled them."""
    measured, model = {p: [] for p in PHASES}, {p: [] for p in PHASES}
    for lane, start, end, unit in bars:
        kinds = PHASES[:3] if lane == "communication" else PHASES[3:]
        kind = next(k for k in kinds if unit not in [u for u, _ in measured[k]])
        measured[kind].append((unit, end - start))
    for s in prediction.timeline:
        if not s.unit.startswith("blocks."):
            continue
        gathered = [u for u, _ in model["forward all-gather"]]
        kind = {
            "all-gather": "backward all-gather"
            if s.unit in gathered
            else "forward all-gather",
        }.get(s.what, s.what)
        model[kind].append((s.unit, s.end - s.start))
    return measured, model


def mean_ms(pairs) -> float:
    """The mean of (unit, seconds) pairs, in ms."""
    return 1e3 * sum(t for _, t in pairs) / len(pairs)


def block_table(measured: dict, model: dict):
    """HTML: each phase's mean per block, measured and predicted."""
    rows = [
        (p, f"{mean_ms(measured[p]):.1f}", f"{mean_ms(model[p]):.1f}") for p in PHASES
    ]
    return html_table(
        ["per block", "measured mean ms", "predicted ms"],
        rows,
        caption="One step of our ZeRO-3 (saved run, 2 ranks) against the model's schedule",
    )


def published_table(published):
    """HTML: every published measurement, its prediction and predicted / published, and for
    a training run the loss its memory is priced with (perfmodel.inputs.LOSS_LOGIT_BYTES)."""
    rows = [
        (
            r["id"],
            f"{r['gpus']:,}",
            f"{r['published']:,}",
            f"{r['predicted']:,.0f}",
            f"{r['ratio']:.2f}",
            UNITS[r["kind"]],
            r.get("loss", ""),
            r["where"],
        )
        for r in published
    ]
    return html_table(
        [
            "measurement",
            "GPUs",
            "published",
            "predicted",
            "ratio",
            "unit",
            "loss",
            "source",
        ],
        rows,
        caption="zerobook.perfmodel.published: sources, quotes and assumptions in the module",
    )


def summary_rows(published, goal: dict) -> list[tuple]:
    """(check, predicted / published, note): the range of each kind's rows inside the goal,
    then each row outside it, with why."""
    rows = []
    names = {"busbw": "bus bandwidths", "tokens": "training throughputs"}
    for kind, name in names.items():
        inside = [
            r["ratio"]
            for r in published
            if r["kind"] == kind and not r["fitted"] and not r["outside"]
        ]
        rows.append(
            (
                f"{name}, predicted / published",
                f"{min(inside):.2f}–{max(inside):.2f}",
                f"{len(inside)} rows predicted, goal ±{goal[kind]:.0%}",
            )
        )
    rows += [
        (f"outside the goal: {r['id']}", f"{r['ratio']:.2f}", r["outside"])
        for r in published
        if r["outside"]
    ]
    return rows


def summary_table(rows):
    """HTML: `summary_rows` and whatever a page adds, three columns."""
    return html_table(
        ["check", "value", "note"],
        rows,
        caption="The model against published measurements, in brief",
    )
