"""What the benchmark scripts share: the command line of a step-time benchmark, and printing a
report (and saving it when asked: the text, and the measurements as JSON beside it, which the
chapters read)."""

import argparse
import json
import time
from pathlib import Path

import zerobook as zb


def emit(text: str, save: str | None, data=None) -> None:
    """Print the report; with `save` (a .md path) write it there, and `data` (the measurements)
    to the same name with .json, with the date they were taken."""
    print(text)
    if save:
        Path(save).write_text(text + "\n")
        if data is not None:
            record = {"date": time.strftime("%Y-%m-%d"), "results": data}
            Path(save).with_suffix(".json").write_text(
                json.dumps(record, indent=1) + "\n"
            )


def table_head(title: str, columns: list[str]) -> list[str]:
    """A report's first lines: its title, then a Markdown table's header for `columns`."""
    return [title, "", "| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]


def step_time_benchmark(run: str, report, **defaults) -> None:
    """Launch `zerobook.runs.<run>` for each --world-sizes (model size and rounds passed on) and
    emit `report({N: rank 0's report})`; `defaults` override the command line's defaults."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument(
        "--batch", type=int, default=4, help="sequences per rank per step"
    )
    parser.add_argument("--save", help="also write the report to this file")
    parser.set_defaults(**defaults)
    cli = parser.parse_args()
    args = [
        "--rounds",
        cli.rounds,
        "--hidden",
        cli.hidden,
        "--layers",
        cli.layers,
        "--batch",
        cli.batch,
    ]
    results = {
        n: zb.torchrun(
            f"zerobook.runs.{run}", nproc=n, echo=False, timeout=1200, args=args
        ).ranks[0]
        for n in cli.world_sizes
    }
    emit(report(results), cli.save, results)
