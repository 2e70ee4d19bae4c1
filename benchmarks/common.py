"""What the benchmark scripts share: the command line of a step-time benchmark, and printing a
report (and saving it when asked)."""
import argparse

import zerobook as zb


def emit(text: str, save: str | None) -> None:
    """Print the report, and write it to `save` too when given."""
    print(text)
    if save:
        with open(save, "w") as f:
            f.write(text + "\n")


def step_time_benchmark(lab: str, report, **defaults) -> None:
    """Launch `zerobook.labs.<lab>` for each --world-sizes (model size and rounds passed on) and
    emit `report({N: rank 0's report})`; `defaults` override the command line's defaults."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4, help="sequences per rank per step")
    parser.add_argument("--save", help="also write the report to this file")
    parser.set_defaults(**defaults)
    cli = parser.parse_args()
    args = ["--rounds", cli.rounds, "--hidden", cli.hidden, "--layers", cli.layers, "--batch", cli.batch]
    results = {n: zb.torchrun(f"zerobook.labs.{lab}", nproc=n, echo=False, timeout=1200, args=args).ranks[0]
               for n in cli.world_sizes}
    emit(report(results), cli.save)
