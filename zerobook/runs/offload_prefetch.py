"""ZeRO-3's parameters offloaded to host memory, with and without prefetch, on one device: the
step's forward and backward time, the copies beside the computation (from the profiler), and the
CUDA allocator's own record of one step (gather -> compute -> free, the saw-tooth).

    python -m zerobook.runs.offload_prefetch --hidden 2048 --layers 8 --batch 16 --trace DIR

Configurations, each the same GPT (seed 0, bf16 on a GPU, one unit per Block):
`resident` (every weight on the device: the computation alone), `offload` (each unit copied
from pinned host memory when it computes), `prefetch` (the next unit's copy issued when a unit
starts, forward and backward; zerobook.zero.offload). Each reports the median time of forward +
backward over `--steps` (the optimizer's step is left out: it is what it was either way);
`parity` the largest difference of each config's gradients from `resident`'s on a small GPT with
deterministic kernels (0: offload moves weights, it changes no arithmetic). With `--trace`, each offloading configuration also writes a profiler trace and the
allocator's record of one step (GPU only). Runs without torchrun; on a CPU, small and untimed.
"""

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

import zerobook as zb
from zerobook.train.models import GPT, Block, GPTConfig, config_of, next_token_loss
from zerobook.train.models import random_batch, shape_options
from zerobook.zero.offload import offload_units

CONFIGS = ("resident", "offload", "prefetch")


def build(config: GPTConfig, name: str, device: str, dtype, log=None):
    """The GPT (seed 0) on `device`, its blocks offloaded unless `name` is resident."""
    torch.manual_seed(0)
    model = GPT(config).to(dtype).to(device)
    units = (
        []
        if name == "resident"
        else offload_units(model, (Block,), name == "prefetch", log)
    )
    return model, units


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def gradients(model, units) -> torch.Tensor:
    """Every gradient, flat, in the module's order: from the host buffers for offloaded units."""
    offloaded = {id(p): (u, u.offsets[id(p)]) for u in units for p in u.params}
    parts = []
    for p in model.parameters():
        if id(p) in offloaded:
            unit, offset = offloaded[id(p)]
            parts.append(unit.host_grad[offset : offset + p.numel()].float())
        else:
            parts.append(p.grad.reshape(-1).float().cpu())
    return torch.cat(parts)


def step(model, units, tokens) -> None:
    """Forward and backward; each gradient of an offloaded unit is copied over its place in the
    unit's host buffer (every parameter gets one, so nothing stale is left)."""
    model.zero_grad(set_to_none=True)
    next_token_loss(model, tokens).backward()


def timed(model, units, tokens, steps: int, device: str) -> list[float]:
    seconds = []
    for _ in range(steps):
        sync(device)
        start = time.perf_counter()
        step(model, units, tokens)
        sync(device)
        seconds.append(time.perf_counter() - start)
    return seconds


def allocator_record(model, units, tokens, points: int = 1500) -> dict:
    """One step under torch.cuda.memory._record_memory_history: bytes allocated over time (all,
    and those of the units' device copies, found by the addresses each fetch got), thinned to
    about `points` samples."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    for unit in units:
        unit.addresses.clear()
    torch.cuda.memory._record_memory_history(
        "all", context=None, stacks="python", max_entries=200_000
    )
    step(model, units, tokens)
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    ours = {(a, u.full_bytes) for u in units for a in u.addresses}
    total, held, series, live = base, 0, [], set()
    trace = snapshot["device_traces"][torch.cuda.current_device()]
    for event in trace:
        sign = {"alloc": 1, "free_completed": -1}.get(event["action"], 0)
        if not sign:
            continue
        total += sign * event["size"]
        addr = event["addr"]
        mine = any(
            a == addr and event["size"] - 512 < size <= event["size"]
            for a, size in ours
        )
        if (
            sign > 0 and mine
        ):  # a unit's copy (its address and size), until that block is freed
            live.add(addr)
            held += event["size"]
        elif sign < 0 and addr in live:
            live.discard(addr)
            held -= event["size"]
        series.append((event.get("time_us", len(series)), total, held))
    every = max(1, len(series) // points)
    t0 = series[0][0] if series else 0
    thinned = [(t - t0, a, h) for t, a, h in series[::every]] + [
        (s[0] - t0, s[1], s[2]) for s in series[-1:]
    ]
    return {
        "t_us": [s[0] for s in thinned],
        "allocated": [s[1] for s in thinned],
        "units": [s[2] for s in thinned],
        "events": len(trace),
        "base": base,
    }


def profile(model, units, tokens, path: Path) -> str:
    """One step under torch.profiler (CPU and CUDA: kernels and memory copies, with their
    streams), its Chrome trace written to `path`."""
    activities = [
        torch.profiler.ProfilerActivity.CPU,
        torch.profiler.ProfilerActivity.CUDA,
    ]
    with torch.profiler.profile(activities=activities) as profiler:
        step(model, units, tokens)
        torch.cuda.synchronize()
    path.parent.mkdir(parents=True, exist_ok=True)
    profiler.export_chrome_trace(str(path))
    return str(path)


def parity(dtype, device: str) -> dict:
    """config -> the largest difference of its gradients from `resident`'s, on a small GPT with
    deterministic kernels (written-out attention; torch.use_deterministic_algorithms): offload
    moves the weights, it must not change a bit of what is computed with them."""
    config = GPTConfig(
        vocab=256, hidden=128, layers=3, heads=4, seq_len=64, attention="manual"
    )
    torch.use_deterministic_algorithms(True)
    grads = {}
    for name in CONFIGS:
        model, units = build(config, name, device, dtype)
        step(model, units, random_batch(config, 2, seed=1).to(device))
        sync(device)
        grads[name] = gradients(model, units)
    torch.use_deterministic_algorithms(False)
    return {
        name: (g - grads["resident"]).abs().max().item() for name, g in grads.items()
    }


def copy_rates(nbytes: int = 2**30) -> dict:
    """GB/s (1e9 B/s) of a pinned host-to-device copy alone, device-to-host alone, and both at once
    on two streams (bytes of both over the time of both): whether the two directions share."""
    host = [torch.empty(nbytes, dtype=torch.uint8, pin_memory=True) for _ in range(2)]
    device = [torch.empty(nbytes, dtype=torch.uint8, device="cuda") for _ in range(2)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]

    def h2d():
        with torch.cuda.stream(streams[0]):
            device[0].copy_(host[0], non_blocking=True)

    def d2h():
        with torch.cuda.stream(streams[1]):
            host[1].copy_(device[1], non_blocking=True)

    def rate(*copies) -> float:
        seconds = []
        for _ in range(4):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for copy in copies:
                copy()
            torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
        return len(copies) * nbytes / min(seconds[1:]) / 1e9

    return {"h2d": rate(h2d), "d2h": rate(d2h), "both": rate(h2d, d2h)}


def run(name: str, config: GPTConfig, cli, me) -> dict:
    log = []
    model, units = build(
        config, name, me.device, cli.dtype, lambda what, u: log.append((what, u.name))
    )
    tokens = random_batch(config, cli.batch, seed=1).to(me.device)
    seconds = timed(model, units, tokens, cli.steps, me.device)
    out = {
        "seconds": statistics.median(seconds[1:] or seconds),
        "all_seconds": seconds,
        "unit_bytes": {u.name: u.full_bytes for u in units},
    }
    log.clear()
    step(model, units, tokens)
    out["events"] = list(log)  # one step's fetches and frees, in order
    if cli.trace and units and me.device.startswith("cuda"):
        out["memory"] = allocator_record(model, units, tokens)
        out["trace"] = profile(model, units, tokens, Path(cli.trace) / f"{name}.json")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    shape_options(parser, hidden=64, layers=4, seq_len=32)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument(
        "--trace", help="a folder for each config's profiler trace (GPU only)"
    )
    cli = parser.parse_args()
    os.environ.setdefault(
        "CUBLAS_WORKSPACE_CONFIG", ":4096:8"
    )  # deterministic cuBLAS (parity)
    me = zb.setup()
    cuda = me.device.startswith("cuda")
    cli.dtype = torch.bfloat16 if cuda else torch.float32
    config = config_of(cli, attention="sdpa")
    same = parity(cli.dtype, me.device)
    rates = copy_rates() if cuda else None
    runs = {name: run(name, config, cli, me) for name in cli.configs.split(",")}
    num_params = sum(p.numel() for p in GPT(config).parameters())
    zb.report(
        runs=runs,
        parity=same,
        copy_rates=rates,
        num_params=num_params,
        config=json.loads(json.dumps(config.__dict__)),
        batch=cli.batch,
        dtype=str(cli.dtype),
        device=me.device,
        device_name=torch.cuda.get_device_name(0) if cuda else "cpu",
    )


if __name__ == "__main__":
    main()
