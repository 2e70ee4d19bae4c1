"""benchmarks/gpu.py's path checks: where ranks can sit on this host, which collectives each
backend runs on CUDA tensors, and every run and every lab's reference solution on each placement
(each answer "ok" with its seconds, or the line of the error)."""

import time
from pathlib import Path

import torch

import zerobook as zb
from zerobook.runs.collective_probe import OPS as PROBE_OPS  # the probe's own list

LABS = Path(__file__).parent.parent / "labs"
RUNS = {  # run -> small arguments (seconds each)
    "hello": [],
    "memory_ddp": [],
    "zero_parity": ["--steps", "3"],
    "zero3_timeline": [],
    "zero3_speed": ["--rounds", "2"],
    "zero_speed": ["--rounds", "2"],
    "fsdp2_side_by_side": ["--steps", "3"],
    "bandwidth": ["--max-bytes", str(2**20)],
    "calibrate": [],
    "zero3_recompute": [],
    "ring_trace": [],
    "ddp_scratch": ["--modes", "naive,bucketed,overlap,torch"],
    "dcp_resume": ["--dir", "{tmp}"],
    "hsdp": ["--shard", "1"],
    "cuda_memory": [],
    "accumulation": ["--micro", "1", "2"],
    "cpu_adam": ["--elements", "1e6", "--repeats", "1"],
    "ddp_buckets": ["--steps", "2"],
    "fsdp1_article": [],
    "fsdp2_float8": [],
    "fsdp2_practice": ["--parts", "meta,dtensor,reshard,offload"],
    "zero3_checkpoint": ["--dir", "{tmp}"],
    "gone_wrong": ["--fault", "none"],
    "desync": ["--at", "99"],  # past the last step: ranks agree throughout
    "ddp_overlap": [],
    "zeropp_qwz": ["--steps", "3"],
    "zeropp_hpz": ["--node-size", "1"],
    "zeropp_qgz": ["--node-size", "1", "--steps", "3"],
}

# the runs RUNS leaves out, and why: every module of zerobook/runs is in one or the other (tested)
ELSEWHERE = {
    "collective_probe": "section 1 runs it, an op a launch",
    "offload_prefetch": "section 8 runs it at two batch sizes",
    "capstone": "section 9 trains it for minutes",
    "fsdp2_tp": "a 2 x 2 mesh: four ranks, and gloo on CUDA has no DTensor collectives",
    "fsdp2_torchao": "section 14, where torchao is installed (not a requirement)",
}


def first_line(error: BaseException) -> str:
    """The line of an error that says what went wrong (a launch error's 'rank R failed: ...')."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    useful = [
        line
        for line in lines
        if "Error" in line or "error" in line or "failed" in line or "died" in line
    ]
    return (useful or lines or [type(error).__name__])[0][:300]


def failure(error: BaseException) -> dict:
    """A path's failed answer: the line that says what went wrong, and the error's end."""
    return {"ok": False, "error": first_line(error), "detail": str(error)[-2000:]}


def launch(run: str, placement: tuple, args=(), timeout: float = 300) -> dict:
    """Rank 0's report of `zerobook.runs.<run>` on `placement`; raises LaunchError on failure."""
    nproc, backend, env = placement
    return zb.torchrun(
        f"zerobook.runs.{run}",
        nproc=nproc,
        backend=backend,
        env=env,
        args=list(args),
        timeout=timeout,
        echo=False,
    ).ranks[0]


def placements(gpus: int) -> dict:
    """How ranks can sit on this host: label -> (ranks, backend, extra environment)."""
    if gpus == 0:
        return {"gloo-cpu": (2, "gloo", {})}
    out = {"nccl": (min(gpus, 4), "nccl", {})}
    if gpus < 4:  # more ranks than GPUs: they share, and only gloo allows that
        out["gloo-cuda"] = (2, "gloo", {"ZEROBOOK_DEVICE": "cuda"})
    return out


def gpu_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def probe(placement: tuple, ops) -> dict:
    """op -> "ok" / "wrong result" / the launch's error, for `ops` in one launch."""
    try:
        right = launch("collective_probe", placement, ["--op", ",".join(ops)], 90)[
            "right"
        ]
        return {op: "ok" if right[op] else "wrong result" for op in ops}
    except Exception as error:  # noqa: BLE001 - the answer is the error
        return {op: first_line(error) for op in ops}


def collectives(gpus: int) -> dict:
    """placement -> op -> "ok" / "wrong result" / the error. gloo on CUDA one op per launch (an op
    it cannot run may abort the process); NCCL with two ranks on one GPU too, where NCCL's refusal
    is measured."""
    tried = dict(placements(gpus))
    if 0 < gpus < 2:
        tried["nccl, 2 ranks on 1 GPU"] = (2, "nccl", {"ZEROBOOK_DEVICE": "cuda"})
    out = {}
    for label, placement in tried.items():
        if placement[2].get("ZEROBOOK_DEVICE") == "cuda":
            out[label] = {op: probe(placement, [op])[op] for op in PROBE_OPS}
        else:
            out[label] = probe(placement, PROBE_OPS)
    return out


def try_run(run: str, label: str, placement: tuple, tmp: str) -> dict:
    """{"ok": True, "seconds"} or {"ok": False, "error"} for one run on one placement."""
    start = time.monotonic()
    try:
        launch(
            run,
            placement,
            [a.format(tmp=f"{tmp}/{run}_{label}") for a in RUNS[run]],
            180,
        )
        return {"ok": True, "seconds": round(time.monotonic() - start, 1)}
    except Exception as error:  # noqa: BLE001 - the answer is the error
        return failure(error)


def every_run(gpus: int, tmp: str, only=None, parallel: int = 1) -> dict:
    """run -> placement -> try_run's answer; `parallel` launches at once (a host with many cores
    and one GPU runs several small runs side by side: they check paths, not speed)."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [
        (run, label, placement)
        for run in RUNS
        if not only or run in only
        for label, placement in placements(gpus).items()
    ]
    with ThreadPoolExecutor(parallel) as pool:
        answers = list(pool.map(lambda job: try_run(*job, tmp), jobs))
    out: dict = {}
    for (run, label, _), answer in zip(jobs, answers):
        out.setdefault(run, {})[label] = answer
    return out


def lab_parts() -> dict:
    """lab -> its harness's parts (zerobook.labs.<lab>.PARTS)."""
    import importlib

    labs = sorted(p.name for p in LABS.iterdir() if (p / f"{p.name}.ipynb").exists())
    return {lab: importlib.import_module(f"zerobook.labs.{lab}").PARTS for lab in labs}


def try_part(lab: str, part: str, label: str, placement: tuple, tmp: str) -> dict:
    """Lab `lab`'s reference solution through its trusted harness, one part on one placement."""
    from zerobook.grading import reference_script, run_part

    student = Path(tmp) / f"{lab}_{part}_{label.replace(' ', '_')}.py"
    student.write_text(reference_script(LABS, lab))
    nproc, backend, env = placement
    start = time.monotonic()
    try:
        run_part(
            lab,
            str(student),
            part,
            nproc=nproc,
            timeout=180,
            debug=False,
            backend=backend,
            env=env,
        )
        return {"ok": True, "seconds": round(time.monotonic() - start, 1)}
    except Exception as error:  # noqa: BLE001 - the answer is the error
        return failure(error)


def every_lab(gpus: int, tmp: str, parallel: int = 1, only=None) -> dict:
    """ "lab/part" -> placement -> try_part's answer, for every lab's reference solution."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [
        (lab, part, label, placement)
        for lab, parts in lab_parts().items()
        for part in parts
        if not only or lab in only or f"{lab}/{part}" in only
        for label, placement in placements(gpus).items()
    ]
    with ThreadPoolExecutor(parallel) as pool:
        answers = list(pool.map(lambda job: try_part(*job, tmp), jobs))
    out: dict = {}
    for (lab, part, label, _), answer in zip(jobs, answers):
        out.setdefault(f"{lab}/{part}", {})[label] = answer
    return out
