"""Ring all-reduce bandwidth: ours (zerobook.data_parallel.collectives) against the backend's built-in.

    python benchmarks/ring.py                 # N = 2 and 4, 1 KiB to 64 MiB, prints ratios
    python benchmarks/ring.py --world-sizes 4 --max-bytes 67108864

Launches zerobook.runs.bandwidth with zb.torchrun (gloo on CPU, NCCL with one GPU per rank), fits
the α-β model to each curve, and prints busbw (nccl-tests' convention, GB = 10^9 B) and the ratio
ours / built-in at the largest size, measured in one run. Timings on a shared machine are noisy:
this is a benchmark to read, not a test to pass.
"""

import argparse
import platform
import sys
import time

import zerobook as zb
from common import emit
from zerobook.accounting import traffic


def measure(world_sizes, min_bytes: int, max_bytes: int, repeats: int) -> list[dict]:
    rows = []
    for n in world_sizes:
        run = zb.torchrun(
            "zerobook.runs.bandwidth",
            nproc=n,
            echo=False,
            timeout=1200,
            args=[
                "--min-bytes",
                min_bytes,
                "--max-bytes",
                max_bytes,
                "--repeats",
                repeats,
            ],
        )
        report = run.ranks[0]
        rows += [
            dict(row, world_size=n, backend=report["backend"]) for row in report["rows"]
        ]
    return rows


def fits(rows: list[dict]) -> dict:
    """(impl, N) -> the α-β fit of its curve."""
    out = {}
    for key in sorted({(r["impl"], r["world_size"]) for r in rows}):
        mine = [r for r in rows if (r["impl"], r["world_size"]) == key]
        out[key] = traffic.fit_alpha_beta(
            [r["bytes"] for r in mine], [r["seconds"] for r in mine], key[1]
        )
    return out


def bw(row: dict) -> dict:
    """algbw and busbw of one measured row, bytes per second."""
    return traffic.bandwidth(
        row["bytes"], row["seconds"], "all_reduce", row["world_size"]
    )


def busbw(row: dict) -> float:
    return bw(row)["busbw"]


def ratios(rows: list[dict]) -> dict:
    """N -> ours / built-in busbw at the largest size measured."""
    out = {}
    for n in sorted({r["world_size"] for r in rows}):
        largest = max(r["bytes"] for r in rows if r["world_size"] == n)
        pick = {
            r["impl"]: r for r in rows if r["world_size"] == n and r["bytes"] == largest
        }
        out[n] = (largest, busbw(pick["ring"]) / busbw(pick["builtin"]))
    return out


def report(rows: list[dict]) -> str:
    lines = [
        f"# ring all-reduce vs built-in ({rows[0]['backend']}), {time.strftime('%Y-%m-%d')}",
        f"machine: {platform.node()} {platform.machine()}, python {sys.version.split()[0]}",
        "",
        "| N | bytes | ours algbw GB/s | ours busbw GB/s | built-in algbw GB/s | built-in busbw GB/s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for n in sorted({r["world_size"] for r in rows}):
        for size in sorted({r["bytes"] for r in rows if r["world_size"] == n}):
            pick = {
                r["impl"]: r
                for r in rows
                if r["world_size"] == n and r["bytes"] == size
            }
            cells = [
                f"{bw(pick[impl])[kind] / 1e9:.3f}"
                for impl in ("ring", "builtin")
                for kind in ("algbw", "busbw")
            ]
            lines.append(f"| {n} | {size} | " + " | ".join(cells) + " |")
    lines.append("")
    for (impl, n), fit in fits(rows).items():
        lines.append(
            f"{impl}, N = {n}: alpha = {fit['alpha'] * 1e6:.1f} us, "
            f"1/beta = {1 / fit['beta'] / 1e9:.3f} GB/s, crossover = {fit['crossover'] / 1024:.0f} KiB"
        )
    for n, (size, ratio) in ratios(rows).items():
        lines.append(
            f"ratio ours / built-in busbw at {size >> 20} MiB, N = {n}: {ratio:.2f} (goal >= 0.8)"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--min-bytes", type=int, default=1024)
    parser.add_argument("--max-bytes", type=int, default=64 * 2**20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--save", help="also write the report to this file")
    cli = parser.parse_args()
    measured = measure(cli.world_sizes, cli.min_bytes, cli.max_bytes, cli.repeats)
    emit(report(measured), cli.save, measured)


if __name__ == "__main__":
    main()
