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
from gpu_report import render

RESULTS = Path(__file__).parent / "results"
MEMORY_MODEL = ["--hidden", "1024", "--layers", "8", "--vocab", "8192", "--batch", "4"]
SPEED_MODEL = ["--hidden", "1024", "--layers", "8", "--batch", "8", "--rounds", "5"]
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
CAPSTONE_MODEL = [
    "--hidden",
    "768",
    "--layers",
    "12",
    "--heads",
    "12",
    "--seq-len",
    "512",
    "--batch",
    "32",
    "--steps",
    "2000",
    "--warmup",
    "100",
    "--lr",
    "1e-3",
    "--eval-every",
    "250",
    "--eval-batches",
    "16",
    "--log-every",
    "250",
    "--sample",
    "400",
]
CAPSTONE_DRY = [
    "--steps",
    "6",
    "--eval-every",
    "6",
    "--eval-batches",
    "1",
    "--sample",
    "8",
]


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


def capstone(gpus: int) -> dict:
    """The capstone's run on one GPU (world size 1: NCCL refuses two ranks on one GPU), plain
    and under FSDP2, the model sized for a few minutes."""
    args, backend = (CAPSTONE_MODEL, "nccl") if gpus else (CAPSTONE_DRY, "gloo")
    return {
        method: launch("capstone", (1, backend, {}), args + ["--method", method], 580)
        for method in ("single", "fsdp2")
    }


def flops_per_second(product, n: int, repeats: int = 10) -> float:
    """FLOP/s of `product()`, an n x n x n matrix product, on this host's first device: three
    calls to warm up, then `repeats` timed (CUDA events on a GPU, the wall clock on a CPU)."""
    for _ in range(3):
        product()
    if not gpu_count():
        start = time.perf_counter()
        for _ in range(repeats):
            product()
        return 2 * n**3 * repeats / (time.perf_counter() - start)
    begin, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    begin.record()
    for _ in range(repeats):
        product()
    end.record()
    torch.cuda.synchronize()
    return 2 * n**3 * repeats / (begin.elapsed_time(end) / 1e3)


def matmul(n: int, dtype: torch.dtype, tf32: bool = False, repeats: int = 10) -> float:
    """FLOP/s of an n x n x n product on this host's first device (CUDA events on a GPU)."""
    device = "cuda" if gpu_count() else "cpu"
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        return flops_per_second(lambda: a @ b, n, repeats)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def matmuls(gpus: int) -> dict:
    n = 8192 if gpus else 256
    return {
        "n": n,
        "bf16": matmul(n, torch.bfloat16),
        "tf32": matmul(n, torch.float32, tf32=True),
        "fp32": matmul(n, torch.float32),
    }


def compute_model(gpus: int) -> dict:
    """The course GPT's forward + backward, measured (zerobook.runs.calibrate on one rank) against
    3 x its forward FLOPs (perfmodel's count) at the measured fp32 matrix-multiply rate."""
    from zerobook.train.models import GPTConfig
    from zerobook.perfmodel.models import course_gpt

    sizes = [(256, 4, 4), (1024, 8, 16)] if gpus else [(64, 2, 2)]
    placement = (1, "nccl" if gpus else "gloo", {})
    out = []
    for hidden, layers, batch in sizes:
        config = GPTConfig(
            vocab=4096, hidden=hidden, layers=layers, heads=4, seq_len=128
        )
        measured = launch(
            "calibrate",
            placement,
            ["--hidden", hidden, "--layers", layers, "--batch", batch],
            300,
        )
        spec, tokens = course_gpt(config), batch * config.seq_len
        flops = 3 * (
            spec.layers * spec.block_forward_flops(tokens, config.seq_len)
            + spec.root_forward_flops(tokens)
        )
        out.append(
            dict(
                hidden=hidden,
                layers=layers,
                batch=batch,
                flops=flops,
                seconds=measured["compute_seconds"],
            )
        )
    return out


def quantize(gpus: int) -> dict:
    """ZeRO++'s qwZ blocks (zerobook.zero.quantized, the chapter's code) timed on the device:
    seconds per element to quantize and to dequantize, and the link speed below which qwZ's
    gather of a unit ends sooner than bf16's on 8 ranks (the zeropp chapter shows it)."""
    from zerobook.zero.quantized import break_even_bandwidth, cost

    elements = 2**26 if gpus else 2**16
    per_element = cost(elements=elements, device="cuda" if gpus else "cpu")
    return {
        **per_element,
        "elements": elements,
        "break_even": break_even_bandwidth(per_element, world_size=8),
    }


def fp8_matmul(n: int = 8192, repeats: int = 10) -> dict:
    """FLOP/s of an n x n x n product in float8 e4m3 (torch._scaled_mm, one scale a tensor, a
    bf16 result: what torchao's float8 training runs, and why FSDP2 can gather its weights in
    FP8) beside bf16's, on an FP8 tensor core (compute capability 8.9 and up)."""
    if torch.cuda.get_device_capability() < (8, 9):
        return "skipped: no FP8 tensor core (compute capability below 8.9)"
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
    one = torch.ones((), device="cuda")
    fp8 = flops_per_second(
        lambda: torch._scaled_mm(
            a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16
        ),
        n,
        repeats,
    )
    return {"n": n, "fp8": fp8, "bf16": matmul(n, torch.bfloat16)}


def nccl_debug(gpus: int, tmp: str) -> dict:
    """NCCL_DEBUG=INFO of one all-reduce (zerobook.runs.hello) on every GPU of this host, a file
    per process (NCCL_DEBUG_FILE), kept whole; and what zerobook.launcher.nccl_log reads in it
    (the gone_wrong chapter shows both, labelled with this host)."""
    from zerobook.launcher import nccl_log

    folder = Path(tmp) / "nccl-debug"
    folder.mkdir()
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV",
        "NCCL_DEBUG_FILE": str(folder / "nccl.%h.%p.log"),
    }
    launch("hello", (gpus, "nccl", env), [], 300)
    text = "".join(path.read_text() for path in sorted(folder.glob("nccl.*.log")))
    facts = nccl_log.read(text)
    return {
        "text": text,
        "ranks": nccl_log.ranks(facts),
        "complete": sorted(facts["comms"][key]["rank"] for key in facts["complete"]),
        "network": sorted(facts["network"]),
        "links": dict(facts["links"]),
        "findings": nccl_log.findings(facts),
    }


def flight_recorder(gpus: int, tmp: str, backend: str = "nccl") -> dict:
    """NCCL's flight recorder of a healthy run (zerobook.runs.gone_wrong, every GPU, its dump at
    the end, TORCH_NCCL_ENABLE_TIMING on): each entry's fields as NCCL records them, the last
    entries, and what torch's analyzer (flight_recorder.fr_trace) prints for the dumps. The
    gone_wrong chapter's recorder ran on gloo; this is NCCL's."""
    import pickle
    import subprocess

    folder = Path(tmp) / "flight-recorder"
    folder.mkdir()
    env = {"TORCH_FR_BUFFER_SIZE": "64", "TORCH_NCCL_ENABLE_TIMING": "1"}
    launch("gone_wrong", (gpus, backend, env), ["--dump", str(folder)], 300)
    dumps = {p.name: pickle.loads(p.read_bytes()) for p in sorted(folder.iterdir())}
    first = next(iter(dumps.values()))
    shown = ("profiling_name", "collective_seq_id", "state", "duration_ms")
    shown += ("input_sizes", "input_dtypes", "timeout_ms")
    analyzer = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace"]
    done = subprocess.run([*analyzer, str(folder)], capture_output=True, text=True)
    return {
        "version": first.get("version"),
        "keys": sorted(first),
        "entry_keys": sorted(first["entries"][0]) if first["entries"] else [],
        "entries": len(first["entries"]),
        "last": [{k: e.get(k) for k in shown} for e in first["entries"][-3:]],
        "pg_config": {str(k): v for k, v in first.get("pg_config", {}).items()},
        "analyzer": (done.stdout + done.stderr)[-3000:],
    }


TORCHAO_MODEL = ["--hidden", "2048", "--layers", "8", "--heads", "16"]
TORCHAO_MODEL += ["--seq-len", "1024", "--batch", "8", "--steps", "8"]
# wider blocks, compiled, where FP8's matmuls may outrun its casts: hidden -> heads
TORCHAO_WIDER = {4096: 32, 8192: 64}
TORCHAO_WIDE = ["--layers", "2", "--seq-len", "2048", "--batch", "4", "--steps", "6"]


def torchao_fp8(gpus: int) -> dict:
    """torchao's FP8 training under FSDP2 (zerobook.runs.fsdp2_torchao: float8 all-gathers and
    FP8 matmuls) beside bf16, eager and with each block compiled, on every GPU: bytes gathered,
    step time, losses; then wider blocks, compiled (`wider`: hidden -> report). torchao is not a
    requirement of the course: skipped where it is missing."""
    try:
        import torchao
    except ImportError:
        return "skipped: torchao is not installed (the course does not require it)"
    out = {"torchao": torchao.__version__}
    for label, extra in (("eager", []), ("compiled", ["--compile"])):
        try:
            out[label] = launch(
                "fsdp2_torchao", (gpus, "nccl", {}), TORCHAO_MODEL + extra
            )
        except Exception as error:  # noqa: BLE001 - one way's failure must not lose the other
            out[label] = {"error": first_line(error), "detail": str(error)[-1500:]}
    out["wider"] = {}
    for hidden, heads in TORCHAO_WIDER.items():
        size = [
            "--hidden",
            str(hidden),
            "--heads",
            str(heads),
            *TORCHAO_WIDE,
            "--compile",
        ]
        try:
            out["wider"][hidden] = launch("fsdp2_torchao", (gpus, "nccl", {}), size)
        except Exception as error:  # noqa: BLE001 - as above
            out["wider"][hidden] = {"error": first_line(error)}
    return out


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
