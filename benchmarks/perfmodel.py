"""The performance model against steps timed here: predicted / measured seconds per step for DDP,
our ZeRO-1, ZeRO-2 and ZeRO-3 (without and with prefetch), N = 2 and 4, in one run.

    python benchmarks/perfmodel.py --save benchmarks/results/perfmodel_cpu_gloo.md

For each N: zerobook.runs.calibrate measures this machine (compute FLOP/s of the course GPT,
AdamW's seconds per element, the all-reduce's alpha-beta fit, gloo's reduce-scatter against its
all-reduce) and zerobook.perfmodel.machine turns it into a hardware preset; zerobook.runs.zero_speed and zero3_speed time the steps
(medians, methods interleaved); zerobook.perfmodel.predict_step predicts them from the preset. The
model was not fitted to these steps: only to the calibration's measurements, and told each
method's gradient buckets (zerobook.perfmodel.machine.RUNS: DDP's 25 MiB, our ZeRO-1's one, ZeRO-2's
2^18 elements, ZeRO-3's one per unit): every bucket pays the collective's latency. Timings on a
shared machine are noisy: a benchmark to read, not a test to pass.
"""

import argparse
import time

from common import emit, table_head

import zerobook as zb
from zerobook.train.models import GPTConfig
from zerobook.perfmodel.machine import RUNS, predict_runs
from zerobook.perfmodel.models import course_gpt

SEQ_LEN = 128


def measure(n: int, cli) -> dict:
    """This machine's calibration and the timed steps, on n ranks."""
    model = ["--hidden", cli.hidden, "--layers", cli.layers, "--batch", cli.batch]
    run = lambda name, extra: zb.torchrun(
        f"zerobook.runs.{name}", nproc=n, args=model + extra, echo=False, timeout=1200
    ).ranks[0]
    return {
        "calibration": run("calibrate", []),
        "zero_speed": run("zero_speed", ["--rounds", cli.rounds]),
        "zero3_speed": run("zero3_speed", ["--rounds", cli.rounds]),
    }


def compare(n: int, measured: dict, cli) -> dict:
    """Method -> predicted and measured seconds (and the prediction's compute and communication)."""
    spec = course_gpt(
        GPTConfig(
            vocab=4096, hidden=cli.hidden, layers=cli.layers, heads=4, seq_len=SEQ_LEN
        )
    )
    predicted = predict_runs(
        measured["calibration"], spec, batch=cli.batch, seq_len=SEQ_LEN
    )
    return {
        name: {
            "predicted": p.step_s,
            "measured": measured[RUNS[name][0]]["median"][RUNS[name][1]],
            "compute": p.compute_s,
            "communication": p.comm_s,
        }
        for name, p in predicted.items()
    }


def report(results: dict) -> str:
    lines = table_head(
        f"# The performance model against steps timed here (gloo, CPU), {time.strftime('%Y-%m-%d')}",
        ["N", "method", "predicted ms", "measured ms", "measured / predicted"]
        + ["predicted compute ms", "predicted communication ms"],
    )
    for n, rows in results.items():
        for name, r in rows["compare"].items():
            lines.append(
                f"| {n} | {name} | {r['predicted'] * 1e3:.1f} | {r['measured'] * 1e3:.1f} | "
                f"{r['measured'] / r['predicted']:.2f} | {r['compute'] * 1e3:.1f} | {r['communication'] * 1e3:.1f} |"
            )
    lines += [
        "",
        "gloo's reduce-scatter over its all-reduce of the same buffer (1-16 MiB, median; a ring's would "
        "be 0.5): "
        + ", ".join(
            f"{rows['measured']['calibration']['reduce_scatter_over_all_reduce']:.2f} at "
            f"N = {n}"
            for n, rows in results.items()
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--save")
    cli = parser.parse_args()
    results = {}
    for n in cli.world_sizes:
        measured = measure(n, cli)
        results[n] = {"measured": measured, "compare": compare(n, measured, cli)}
    emit(report(results), cli.save, results)


if __name__ == "__main__":
    main()
