"""ZeRO-1/2 step time: ours (zerobook.zero) against DDP and ZeroRedundancyOptimizer, in one run.

    python benchmarks/zero12.py                       # N = 2 and 4, prints ratios
    python benchmarks/zero12.py --world-sizes 4 --save benchmarks/results/zero12_cpu_gloo.md

Launches zerobook.runs.zero_speed with zb.torchrun (gloo on CPU, NCCL with one GPU per rank) and
prints rank 0's median seconds per step of each method, then the ratios: our stage 1 / PyTorch's
ZeroRedundancyOptimizer (goal <= 1.0), our stage 1 / DDP, and stage 2 with its reduce-scatters
overlapping backward / waiting for each. Timings on a shared machine are noisy: a benchmark to
read, not a test to pass.
"""

import platform
import sys
import time

from common import step_time_benchmark


def report(results: dict[int, dict]) -> str:
    first = next(iter(results.values()))
    lines = [
        f"# ZeRO-1/2 step time ({first['backend']}, {first['num_params']:,} parameters, fp32), "
        f"{time.strftime('%Y-%m-%d')}",
        f"machine: {platform.node()} {platform.machine()}, python {sys.version.split()[0]}",
        "",
        "| N | DDP ms | ZeroRO ms | ours stage 1 ms | stage 2 overlap ms | stage 2 no overlap ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for n, r in results.items():
        m = r["median"]
        cells = [
            f"{m[k] * 1e3:.1f}"
            for k in ("ddp", "zero_ro", "zero1", "zero2_overlap", "zero2_no_overlap")
        ]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines.append("")
    for n, r in results.items():
        m = r["median"]
        lines += [
            f"N = {n}: ours stage 1 / ZeroRedundancyOptimizer = {m['zero1'] / m['zero_ro']:.2f} (goal <= 1.0)",
            f"N = {n}: ours stage 1 / DDP = {m['zero1'] / m['ddp']:.2f}",
            f"N = {n}: stage 2 overlap / no overlap = {m['zero2_overlap'] / m['zero2_no_overlap']:.2f}",
        ]
    return "\n".join(lines)


def main() -> None:
    step_time_benchmark("zero_speed", report)


if __name__ == "__main__":
    main()
