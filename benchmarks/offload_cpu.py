"""The host's side of ZeRO-Offload: torch.optim.AdamW on the CPU at shard sizes from inside the
caches to well beyond them, one rank alone and every core's rank at once (the ranks of one host
share its memory bandwidth and cores, as a node's GPUs share their host).

    python benchmarks/offload_cpu.py --save benchmarks/results/offload_cpu.md

Reports elements per second per rank (zerobook.runs.cpu_adam) and what the offload chapter's
example shard (7.5B parameters over 64 GPUs) would take at each rate.
"""

import argparse
import os

from common import emit, table_head

import zerobook as zb

SIZES = [4e6, 32e6, 117e6]  # elements: a cache's worth, more, and the chapter's shard


def report(results: dict) -> str:
    lines = table_head(
        "# CPU AdamW at offload's sizes (elements per second per rank)",
        ["ranks at once", "threads each", "implementation", "elements", "M elements/s"]
        + ["s for 117M"],
    )
    for n, rank in results.items():
        for key, rate in rank["rates"].items():
            name, elements = key.split()
            lines.append(
                f"| {n} | {rank['threads']} | {name} | {int(elements):,} | "
                f"{rate / 1e6:,.0f} | {117e6 / rate:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", help="also write the report to this file")
    cli = parser.parse_args()
    cores = (
        len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count()
    )
    args = ["--elements", *map(str, SIZES)]
    results = {
        n: zb.torchrun(
            "zerobook.runs.cpu_adam", nproc=n, echo=False, timeout=1800, args=args
        ).ranks[0]
        for n in sorted({1, cores})
    }
    emit(report(results), cli.save, results)


if __name__ == "__main__":
    main()
