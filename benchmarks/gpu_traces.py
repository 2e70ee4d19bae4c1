"""benchmarks/gpu.py's sections read from the profiler's traces: which CUDA streams a ZeRO-3
step's collectives and copies ran on beside compute (section 5's streams), and ZeRO-3 offload's
host-to-device copies beside compute (section 8)."""

import json
from pathlib import Path

from gpu_paths import launch, placements

OFFLOAD_MODEL = [
    "--hidden",
    "2048",
    "--layers",
    "8",
    "--heads",
    "16",
    "--seq-len",
    "1024",
    "--steps",
    "5",
]
OFFLOAD_BATCHES = (
    4,
    16,
)  # sequences per step: copy-bound, then compute-bound (a block's copy is fixed)


def intervals_overlap(a: list, b: list) -> float:
    """Total time covered by both interval lists at once (each a list of (start, end), merged first)."""

    def merged(spans):
        out = []
        for start, end in sorted(spans):
            if out and start <= out[-1][1]:
                out[-1][1] = max(out[-1][1], end)
            else:
                out.append([start, end])
        return out

    total, b = 0.0, merged(b)
    for start, end in merged(a):
        total += sum(max(0.0, min(end, e) - max(start, s)) for s, e in b)
    return total


def busy_beside_compute(kinds: dict) -> dict:
    """kind -> count, streams, busy microseconds and those while a `compute` event ran, for
    lists of profiler events by kind (`compute` among them)."""
    span = lambda es: [(e["ts"], e["ts"] + e["dur"]) for e in es]
    return {
        kind: dict(
            count=len(es),
            streams=sorted({e.get("args", {}).get("stream") for e in es}),
            busy_us=sum(e["dur"] for e in es),
            beside_compute_us=intervals_overlap(span(es), span(kinds["compute"]))
            if kind != "compute"
            else 0,
        )
        for kind, es in kinds.items()
    }


def kernel_overlap(trace_path: str) -> dict:
    """From a profiler trace: NCCL kernels, memory copies and compute kernels, the streams each ran
    on, their busy time, and how long each kind ran while a compute kernel did (microseconds)."""
    events = json.loads(Path(trace_path).read_text())["traceEvents"]
    return busy_beside_compute(
        {
            "nccl": [
                e
                for e in events
                if e.get("cat") == "kernel" and "nccl" in e["name"].lower()
            ],
            "copies": [e for e in events if e.get("cat") == "gpu_memcpy"],
            "compute": [
                e
                for e in events
                if e.get("cat") == "kernel" and "nccl" not in e["name"].lower()
            ],
        }
    )


def copy_overlap(trace_path: str) -> dict:
    """From a profiler trace: host-to-device and device-to-host copies and compute kernels, their
    busy time, streams, and how long each copy direction ran while a compute kernel did (us);
    `window_us` from the first GPU event's start to the last one's end."""
    events = json.loads(Path(trace_path).read_text())["traceEvents"]
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    kinds = {
        "h2d": [e for e in copies if "HtoD" in e["name"]],
        "d2h": [e for e in copies if "DtoH" in e["name"]],
        "compute": [e for e in events if e.get("cat") == "kernel"],
    }
    ends = [
        t for es in kinds.values() for e in es for t in (e["ts"], e["ts"] + e["dur"])
    ]
    return dict(
        busy_beside_compute(kinds), window_us=max(ends) - min(ends) if ends else 0.0
    )


def streams(gpus: int, tmp: str) -> dict:
    """placement -> kernel_overlap of one ZeRO-3 step with forward prefetch (zerobook.runs.
    zero3_timeline --trace): which streams the collectives and copies run on, beside compute."""
    out = {}
    for label, placement in placements(gpus).items():
        report = launch(
            "zero3_timeline",
            placement,
            [
                "--configs",
                "forward",
                "--hidden",
                "1024",
                "--layers",
                "8",
                "--batch",
                "8",
                "--trace",
                f"{tmp}/{label}",
            ],
            300,
        )
        out[label] = kernel_overlap(report["trace"]["path"])
    return out


def offload(gpus: int, tmp: str) -> dict:
    """sequences per step -> zerobook.runs.offload_prefetch's report (world size 1), each
    offloading config's trace replaced by copy_overlap of it (no GPU: one small CPU run)."""
    out = {}
    for batch in OFFLOAD_BATCHES if gpus else (2,):
        args = (
            OFFLOAD_MODEL + ["--trace", f"{tmp}/offload{batch}"]
            if gpus
            else ["--steps", "2"]
        )
        report = launch(
            "offload_prefetch",
            (1, "nccl" if gpus else "gloo", {}),
            args + ["--batch", str(batch)],
            300,
        )
        for run in report["runs"].values():
            if "trace" in run:
                run["kernels"] = copy_overlap(run.pop("trace"))
        out[batch] = report
    return out
