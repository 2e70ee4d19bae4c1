"""ZeRO-3's timeline: the same training under several prefetch settings, every event recorded.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.zero3_timeline --configs none,forward,pre,post

Each configuration trains the same GPT (seed 0, one unit per block) for `--steps` steps with
`Zero3AdamW`; the events of the last step (gather, prefetch, compute, backward, reduce-scatter per
unit, each with the bytes of full parameters allocated at that moment) are reported with the
median step time, the final weights' largest difference from the first configuration, and the
bytes the rank keeps between steps.
"""

import argparse
import os
import statistics
import time
from dataclasses import asdict, dataclass, replace

import torch

import zerobook as zb
from zerobook.train import measure
from zerobook.train.models import GPT, Block, GPTConfig, next_token_loss, random_batch
from zerobook.train.training import flat_weights, rank_batch, train_step
from zerobook.zero import Prefetch, Zero3AdamW

CONFIGS = {  # name -> Zero3AdamW's prefetch
    "none": Prefetch(),
    "forward": Prefetch(forward=True),
    "pre": Prefetch(forward=True, backward="pre"),
    "post": Prefetch(forward=True, backward="post"),
    "pre_only": Prefetch(backward="pre"),
    "post_only": Prefetch(backward="post"),
    "depth2": Prefetch(forward=True, backward="pre", depth=2),
    "depth2_limit2": Prefetch(forward=True, backward="pre", depth=2, max_gathered=2),
}


@dataclass
class Report:
    """What every rank reports: `runs[config]` holds `events` (ZeRO-3's Events as dicts, seconds
    since the last step began), `seconds`, `persistent_bytes`, `unit_bytes` and `diff` (from the
    first config's weights); `trace` the Chrome trace's `path` and the range `names` in it."""

    runs: dict
    trace: dict | None
    num_params: int


def train(
    prefetch: Prefetch,
    config: GPTConfig,
    steps: int,
    batch: int,
    me: zb.Rank,
    dtype=torch.float32,
) -> dict:
    torch.manual_seed(0)
    model = GPT(config).to(dtype).to(me.device)
    zero = Zero3AdamW(model, unit_types=(Block,), lr=1e-3, prefetch=prefetch)
    seconds = []
    for step in range(steps):
        tokens = rank_batch(config, batch, step, me)
        zero.events = []
        start = time.perf_counter()
        train_step(model, zero, tokens)
        seconds.append(time.perf_counter() - start)
    events = [
        replace(e, t=e.t - start) for e in zero.events
    ]  # seconds since the step began
    zero.gather_all()
    weights = flat_weights(model)
    return {
        "weights": weights,
        "events": events,
        "seconds": statistics.median(seconds[1:] or seconds),
        "persistent_bytes": measure.unique_bytes(zero.persistent_tensors()),
        "unit_bytes": {u.name: u.full_bytes for u in zero.units},
    }


def chrome_trace(
    prefetch: Prefetch, config: GPTConfig, batch: int, path: str, me: zb.Rank
) -> list[str]:
    """Profile one step (after a warm-up) with torch.profiler, write its Chrome trace to `path`,
    and return the names of our ranges and of the collectives recorded in it."""
    torch.manual_seed(0)
    model = GPT(config).to(me.device)
    zero = Zero3AdamW(model, unit_types=(Block,), lr=1e-3, prefetch=prefetch)
    tokens = random_batch(config, batch, seed=me.rank).to(me.device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if tokens.is_cuda:
        activities.append(
            torch.profiler.ProfilerActivity.CUDA
        )  # kernels, with the stream each ran on
    for step in range(2):
        with torch.profiler.profile(activities=activities) as profiler:
            next_token_loss(model, tokens).backward()
            zero.step()
            zero.zero_grad()
            if tokens.is_cuda:
                torch.cuda.synchronize()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    profiler.export_chrome_trace(path)
    names = {e.name for e in profiler.events()}
    return sorted(
        n for n in names if n.startswith("zero3 ") or "gather" in n or "scatter" in n
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", default="none,forward,pre,post")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument(
        "--trace",
        help="also write a Chrome trace of one step of the first config "
        "to TRACE/trace_rank<r>.json (open in chrome://tracing or ui.perfetto.dev)",
    )
    cli = parser.parse_args()
    me = zb.setup()
    config = GPTConfig(
        vocab=256, hidden=cli.hidden, layers=cli.layers, heads=4, seq_len=64
    )
    dtype = getattr(torch, cli.dtype)
    runs = {
        name: train(CONFIGS[name], config, cli.steps, cli.batch, me, dtype)
        for name in cli.configs.split(",")
    }
    first = next(iter(runs.values()))["weights"]
    for run in runs.values():
        run["diff"] = (run.pop("weights") - first).abs().max().item()
    trace = None
    if cli.trace:
        path = f"{cli.trace}/trace_rank{me.rank}.json"
        trace = {
            "path": path,
            "names": chrome_trace(
                CONFIGS[cli.configs.split(",")[0]], config, cli.batch, path, me
            ),
        }
    zb.report(
        **asdict(Report(runs, trace, sum(p.numel() for p in GPT(config).parameters())))
    )


if __name__ == "__main__":
    main()
