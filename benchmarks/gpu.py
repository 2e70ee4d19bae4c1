"""make gpu-check: every GPU path of the course, run on whatever GPUs this host has, and what only a
GPU can show, written to benchmarks/results/gpu_<device>_<date>.md (and .json, which chapters read).

    python benchmarks/gpu.py                 # on a GPU host: all sections, results saved
    python benchmarks/gpu.py --dry-run       # anywhere: the CPU path (make test runs it)

Sections: 1. which collectives each backend runs on CUDA tensors (NCCL needs one GPU per rank;
several ranks sharing a GPU use gloo on CUDA tensors); 2. every run of zerobook.runs with device
tensors, on each placement the host allows, and every lab's reference solution through its
trusted harness, part by part; 3. the CUDA allocator against the calculator
(zerobook.runs.cuda_memory); 4. collective bandwidth (nccl-tests' algbw and busbw); 5. ours vs
FSDP2 step time and prefetch overlap (zerobook.runs.zero3_speed); 6. dense matrix-multiply
throughput against the datasheet; 7. the performance model's compute time against a measured step; 8. ZeRO-3 offload with and
without prefetch (zerobook.runs.offload_prefetch: step time, host-to-device copies beside compute
from the profiler, the allocator's record of one step); 9. the capstone's GPT trained on real text
in bf16 (zerobook.runs.capstone: tokens/s, held-out bits per byte, a sample); 10. qwZ's
quantization timed; 11. NCCL_DEBUG=INFO of one all-reduce, kept whole (zerobook.launcher.nccl_log
reads it); 12. an FP8 matrix multiply (torch._scaled_mm) beside bf16's; 13. NCCL's flight
recorder of a healthy run (zerobook.runs.gone_wrong's dump: each entry's state); 14. torchao's
FP8 training under FSDP2 beside bf16 (zerobook.runs.fsdp2_torchao), where torchao is installed.
Each section is recorded as it ends; one that fails records its error and the next one runs.
The sections live by kind: gpu_paths (1, 2), gpu_traces (5's streams, 8), gpu_compute (6, 7, 9,
10, 12, 14), gpu_diagnose (11, 13), this file the rest; gpu_report renders them.
"""

import argparse
import json
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

from gpu_paths import (
    collectives,
    every_lab,
    every_run,
    first_line,
    gpu_count,
    launch,
    placements,
)
from gpu_compute import (
    capstone,
    compute_model,
    fp8_matmul,
    matmuls,
    quantize,
    torchao_fp8,
)
from gpu_diagnose import flight_recorder, nccl_debug
from gpu_report import render
from gpu_traces import offload, streams

RESULTS = Path(__file__).parent / "results"
MEMORY_MODEL = ["--hidden", "1024", "--layers", "8", "--vocab", "8192", "--batch", "4"]
SPEED_MODEL = ["--hidden", "1024", "--layers", "8", "--batch", "8", "--rounds", "5"]


def environment() -> dict:
    """Device, driver, torch, CUDA and NCCL versions."""
    import subprocess

    out = dict(
        torch=torch.__version__,
        cuda=torch.version.cuda,
        gpus=gpu_count(),
        date=time.strftime("%Y-%m-%d"),
    )
    if out["gpus"]:
        out.update(
            device=torch.cuda.get_device_name(0),
            nccl=".".join(map(str, torch.cuda.nccl.version())),
            memory_bytes=torch.cuda.get_device_properties(0).total_memory,
        )
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        out["driver"] = smi.stdout.strip() or "unknown"
    return out


def cuda_memory(gpus: int, model_args, world_sizes=(2, 4), env=None) -> dict:
    """world size -> rank 0's cuda_memory report (NCCL when each rank has a GPU, else gloo on
    CUDA), the ranks' environment given `env` besides (the allocator's PYTORCH_CUDA_ALLOC_CONF)."""
    out = {}
    for n in world_sizes:
        placement = (
            (n, "nccl", dict(env or {}))
            if gpus >= n
            else (
                n,
                "gloo",
                {"ZEROBOOK_DEVICE": "cuda", **(env or {})} if gpus else dict(env or {}),
            )
        )
        out[n] = launch("cuda_memory", placement, model_args, 300)
    return out


def bandwidth(gpus: int) -> dict:
    """Built-in all-reduce, reduce-scatter and all-gather (and our ring where the backend has
    send/recv on these tensors) from 1 KiB to 256 MiB at the widest placement."""
    label, placement = (
        next(iter(placements(gpus).items()))
        if gpus >= 2
        else list(placements(gpus).items())[-1]
    )
    impls = "builtin,reduce_scatter,all_gather" + (
        ",ring" if placement[1] == "nccl" or gpus == 0 else ""
    )
    report = launch(
        "bandwidth",
        placement,
        ["--max-bytes", str(2**28 if gpus else 2**20), "--impls", impls],
        300,
    )
    return dict(report, placement=label)


def step_times(gpus: int, model_args) -> dict:
    """placement -> zero3_speed's report: ours vs FSDP2, with and without prefetch."""
    return {
        label: launch("zero3_speed", placement, model_args, 300)
        for label, placement in placements(gpus).items()
    }


def merged_date(earlier: str | None, today: str) -> str:
    """The dates a check's sections were measured on, when --sections merges today's into an
    earlier record: "first to today" (or as it was, when today is its last day)."""
    if not earlier or earlier.endswith(today):
        return earlier or today
    return f"{earlier.split(' to ')[0]} to {today}"


def run_sections(
    gpus: int, dry_run: bool, tmp: str, record, results: dict, only=None, parallel=6
) -> dict:
    """Every section in turn (or those in `only`), into `results` (the dry run: the CPU path of
    each, small); `record` after each. `parallel`: launches at once in `runs` and `labs` on a
    GPU host."""
    env = environment()
    env["date"] = merged_date(results.get("environment", {}).get("date"), env["date"])
    results.update(environment=env, dry_run=dry_run)
    work = {
        "collectives": lambda: collectives(gpus) if gpus else "skipped: no GPU",
        "runs": lambda: every_run(
            gpus,
            tmp,
            only={"hello"} if dry_run else None,
            parallel=parallel if gpus else 1,
        ),
        "labs": lambda: every_lab(
            gpus,
            tmp,
            parallel=parallel if gpus else 1,
            only={"setup_check/all_reduce"} if dry_run else None,
        ),
        "memory": lambda: cuda_memory(
            gpus, *(([], (2,)) if dry_run else (MEMORY_MODEL,))
        ),
        # the same with segments that grow in place: fewer holes (reserved over allocated)
        "memory_expandable": lambda: cuda_memory(
            gpus,
            *(([], (2,)) if dry_run else (MEMORY_MODEL,)),
            env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        ),
        "bandwidth": lambda: bandwidth(gpus) if gpus else "skipped: no GPU",
        "nccl_debug": lambda: nccl_debug(gpus, tmp) if gpus else "skipped: no GPU",
        "fp8_matmul": lambda: fp8_matmul() if gpus else "skipped: no GPU",
        "flight_recorder": lambda: (
            flight_recorder(gpus, tmp) if gpus else "skipped: no GPU"
        ),
        "torchao": lambda: torchao_fp8(gpus) if gpus else "skipped: no GPU",
        "step_times": lambda: (
            step_times(gpus, SPEED_MODEL) if gpus else "skipped: no GPU"
        ),
        "streams": lambda: streams(gpus, tmp) if gpus else "skipped: no GPU",
        "matmul": lambda: matmuls(gpus),
        "compute_model": lambda: compute_model(gpus) if gpus else "skipped: no GPU",
        "offload": lambda: offload(gpus, tmp),
        "capstone": lambda: capstone(gpus),
        "quantize": lambda: quantize(gpus),
    }
    for name, fn in work.items():
        if only and name not in only:
            continue
        start = time.monotonic()
        try:
            results[name] = fn()
        except Exception as error:  # noqa: BLE001 - one section's failure must not lose the others
            results[name] = {
                "error": first_line(error),
                "traceback": traceback.format_exc()[-2000:],
            }
        print(f"[gpu-check] {name}: {time.monotonic() - start:.0f} s", flush=True)
        record(results)
    return results


def default_save(env: dict) -> Path:
    name = env.get("device", "cpu").lower().replace("nvidia ", "").split()[0]
    return RESULTS / f"gpu_{name}_{env['date']}.md"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dry-run", action="store_true", help="the CPU path (the default with no GPU)"
    )
    parser.add_argument(
        "--save",
        help="the .md to write (default: results/gpu_<device>_<date>.md on a GPU)",
    )
    parser.add_argument(
        "--sections", help="comma-separated: only these, merged into the saved results"
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=6,
        help="launches at once in the runs and labs sections (a GPU host's cores)",
    )
    cli = parser.parse_args(argv)
    gpus = gpu_count()
    dry_run = cli.dry_run or not gpus
    save = (
        Path(cli.save)
        if cli.save
        else (None if dry_run else default_save(environment()))
    )

    def record(results):
        if (
            save
        ):  # the measurements first: a report that fails to render must not lose them
            save.with_suffix(".json").write_text(
                json.dumps(results, indent=1, default=str) + "\n"
            )
        text = render(results)
        if save:
            save.write_text(text + "\n")
        return text

    only = set(cli.sections.split(",")) if cli.sections else None
    earlier = (
        json.loads(save.with_suffix(".json").read_text())
        if only and save and save.with_suffix(".json").exists()
        else {}
    )
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        print(
            record(
                run_sections(gpus, dry_run, tmp, record, earlier, only, cli.parallel)
            )
        )


if __name__ == "__main__":
    sys.exit(main())
