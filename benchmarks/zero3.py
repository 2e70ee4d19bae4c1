"""ZeRO-3 step time: ours (zerobook.zero.Zero3AdamW) against PyTorch's FSDP2, in one run.

    python benchmarks/zero3.py                       # N = 2 and 4, prints ratios
    python benchmarks/zero3.py --world-sizes 2 --save benchmarks/results/zero3_cpu_gloo.md

Launches zerobook.runs.zero3_speed with zb.torchrun (gloo on CPU, NCCL with one GPU per rank) and
prints rank 0's median seconds per step of each method — ours without prefetch, with backward ("pre")
prefetch only (the schedule FSDP2's defaults give on a CPU: the like-for-like), and with forward +
backward prefetch; FSDP2 with its defaults (implicit forward prefetch, which needs CUDA
streams and does nothing on a CPU, and backward prefetch one block ahead) and with explicit forward
and backward prefetch (set_modules_to_*_prefetch) — the ratios ours / FSDP2 (goal <= 1.0), the overlap efficiency of our prefetch,
(T_no_prefetch - T_prefetch) / min(T_comm, T_compute), with T_comm and T_compute summed from our
no-prefetch run's events, what the machine lets overlap at all (one block's gather alone, its
forward alone, both at once: the most any prefetch could hide), and on a GPU the CUDA peak ratio
ours / FSDP2. Timings on a shared
machine are noisy: a benchmark to read, not a test to pass.
"""

import time

from common import step_time_benchmark

METHODS = ("ours", "ours_backward", "ours_prefetch", "fsdp2", "fsdp2_prefetch")


def overlap_efficiency(r: dict) -> float:
    saved = r["median"]["ours"] - r["median"]["ours_prefetch"]
    return saved / min(r["lanes"]["communication"], r["lanes"]["computation"])


def report(results: dict[int, dict]) -> str:
    first = next(iter(results.values()))
    lines = [
        f"# ZeRO-3 step time, ours vs FSDP2 ({first['backend']}, {first['num_params']:,} parameters, fp32, "
        f"{first['batch']} sequences of {first['seq_len']} per rank), "
        f"{time.strftime('%Y-%m-%d')}",
        "",
        "| N | ours, no prefetch ms | ours, backward prefetch (FSDP2's default schedule) ms | ours, forward + backward prefetch ms | "
        "FSDP2, defaults ms | FSDP2, explicit forward + backward prefetch ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for n, r in results.items():
        lines.append(
            f"| {n} | "
            + " | ".join(f"{r['median'][m] * 1e3:.1f}" for m in METHODS)
            + " |"
        )
    lines.append("")
    for n, r in results.items():
        m = r["median"]
        lines += [
            f"N = {n}: like for like, FSDP2's default schedule (backward prefetch one block ahead; its implicit "
            f"forward prefetch needs CUDA streams): ours {m['ours_backward'] / m['fsdp2']:.2f} x FSDP2 "
            f"(ours without any prefetch {m['ours'] / m['fsdp2']:.2f})",
            f"N = {n}: both with forward + backward prefetch {m['ours_prefetch'] / m['fsdp2_prefetch']:.2f} (goal <= 1.0)",
            f"N = {n}: overlap efficiency of our prefetch = {overlap_efficiency(r):.2f} "
            f"(T_comm {r['lanes']['communication'] * 1e3:.1f} ms, T_compute {r['lanes']['computation'] * 1e3:.1f} ms)",
            f"N = {n}: what this machine lets overlap at all: one block's gather {r['machine']['gather'] * 1e3:.1f} ms, "
            f"its forward {r['machine']['compute'] * 1e3:.1f} ms, both at once {r['machine']['both'] * 1e3:.1f} ms: "
            f"bound {r['machine']['bound']:.2f}",
        ]
        lines.append(
            f"N = {n}: bytes kept per rank (weights, gradients, AdamW; counted on tensors) ours / FSDP2 = "
            f"{r['kept']['ours'] / r['kept']['fsdp2']:.3f}"
        )
        if r["peak"]["ours"] is not None:
            lines.append(
                f"N = {n}: CUDA peak ours / FSDP2 = {r['peak']['ours'] / r['peak']['fsdp2']:.2f}, "
                f"with prefetch {r['peak']['ours_prefetch'] / r['peak']['fsdp2_prefetch']:.2f}"
            )
        else:
            lines.append(
                f"N = {n}: peak memory: no allocator statistics on CPU (run on a GPU host)"
            )
    return "\n".join(lines)


def main() -> None:
    step_time_benchmark("zero3_speed", report)


if __name__ == "__main__":
    main()
