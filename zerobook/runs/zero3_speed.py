"""Step time of our ZeRO-3 against PyTorch's FSDP2, with and without prefetch, on every rank.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.zero3_speed --rounds 5

The same GPT (one unit per block plus the root, fp32, AdamW) under: ours without prefetch, ours
with forward and backward ("pre") prefetch, FSDP2 with its defaults, FSDP2 with explicit forward
and backward prefetch of the next block. Methods take turns, `--steps` timed steps each per
round. Reported: median seconds per step, the CUDA allocator's peak per method on a GPU (None on
CPU, which has no allocator statistics), the bytes of weights, gradients and optimizer state kept
per rank (counted on the tensors), and, from our no-prefetch run's events, one step's timeline
(zerobook.zero.timeline.timeline_bars) and the time spent waiting for communication and computing
(for the overlap efficiency).
"""

import argparse
import statistics
import time

import torch

import zerobook as zb
from zerobook.fsdp2 import kept_bytes, shard_blocks
from zerobook.train.models import GPT, Block, GPTConfig, next_token_loss, random_batch
from zerobook.train.training import timed_steps
from zerobook.zero import Prefetch, Zero3AdamW
from zerobook.zero.timeline import timeline_bars

# "ours_backward": backward prefetch one unit ahead and nothing forward, what FSDP2's defaults do on a
# CPU (its implicit forward prefetch needs CUDA streams): the like-for-like with "fsdp2"
METHODS = ["ours", "ours_backward", "ours_prefetch", "fsdp2", "fsdp2_prefetch"]
PREFETCH = {
    "ours": Prefetch(),
    "ours_backward": Prefetch(backward="pre"),
    "ours_prefetch": Prefetch(forward=True, backward="pre"),
}


def build(method: str, config: GPTConfig, me: zb.Rank):
    torch.manual_seed(0)
    model = GPT(config).to(me.device)
    if method.startswith("ours"):
        return model, Zero3AdamW(
            model, unit_types=(Block,), lr=1e-4, prefetch=PREFETCH[method]
        )
    shard_blocks(model, me)
    blocks = list(model.blocks)
    if method == "fsdp2_prefetch":
        for k, block in enumerate(blocks):
            block.set_modules_to_forward_prefetch(blocks[k + 1 : k + 2])
            block.set_modules_to_backward_prefetch(blocks[k - 1 : k] if k else [])
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def peak_bytes(model, optimizer, batch) -> int | None:
    """The CUDA allocator's peak over one step of this method (None on CPU)."""
    if not batch.is_cuda:
        return None
    torch.cuda.reset_peak_memory_stats()
    timed_steps(model, optimizer, batch, 1)
    return torch.cuda.max_memory_allocated()


def bytes_kept(model, optimizer, batch) -> int:
    """Weights, gradients and optimizer state this rank holds after one more step (tensors counted)."""
    next_token_loss(model, batch).backward()
    optimizer.step()
    kept = kept_bytes(model, optimizer)
    optimizer.zero_grad()
    return kept


def interleaved_seconds(fns: dict, rounds: int = 20) -> dict:
    """Median seconds of each fn(), the fns taking turns `rounds` times after a warm-up call each
    (so that a slow spell of a shared machine falls on all of them alike)."""
    times = {name: [] for name in fns}
    for round_ in range(rounds + 1):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            if round_:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


@torch.no_grad()
def machine_overlap(zero: Zero3AdamW, block: torch.nn.Module, x: torch.Tensor) -> dict:
    """What this machine lets overlap at all: one block's all-gather alone, its forward alone,
    and both at once (the gather async on gloo's/NCCL's own thread or stream); bound =
    (t_gather + t_compute - t_both) / min(t_gather, t_compute), the most any prefetch could hide."""
    unit, computing = (
        zero.units[1],
        zero.units[-1],
    )  # the first block gathers, the last computes
    if unit is computing:
        raise ValueError("machine_overlap needs at least two blocks")

    def gather():  # noqa: E306
        unit.wait_gather()
        unit.free()

    def both():  # noqa: E306
        unit.start_gather()
        block.forward(
            x
        )  # .forward: without Zero3AdamW's hooks, which would gather and free it
        unit.wait_gather()
        unit.free()

    computing.wait_gather()  # gathered throughout
    out = interleaved_seconds(
        {"gather": gather, "compute": lambda: block.forward(x), "both": both}
    )
    computing.free()
    out["bound"] = (out["gather"] + out["compute"] - out["both"]) / min(
        out["gather"], out["compute"]
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    cli = parser.parse_args()
    me = zb.setup()
    config = GPTConfig(
        vocab=4096, hidden=cli.hidden, layers=cli.layers, heads=4, seq_len=128
    )
    batch = random_batch(config, cli.batch, seed=me.rank).to(me.device)
    built = {m: build(m, config, me) for m in METHODS}
    for m in METHODS:
        timed_steps(*built[m], batch, 1)  # warm-up
    times = {m: [] for m in METHODS}
    for _ in range(cli.rounds):
        for m in METHODS:
            times[m] += timed_steps(*built[m], batch, cli.steps)
    built["ours"][
        1
    ].events = []  # one more step without prefetch, for its timeline alone
    timed_steps(*built["ours"], batch, 1)
    model, zero = built["ours"]
    x = torch.randn(cli.batch, config.seq_len, config.hidden, device=me.device)
    machine = machine_overlap(zero, model.blocks[-1], x)
    bars = timeline_bars(built["ours"][1].events)
    lanes = {
        lane: sum(end - start for kind, start, end, _ in bars if kind == lane)
        for lane in ("communication", "computation")
    }
    zb.report(
        median={m: statistics.median(s) for m, s in times.items()},
        lanes=lanes,
        bars=bars,
        machine=machine,
        peak={m: peak_bytes(*built[m], batch) for m in METHODS},
        kept={m: bytes_kept(*built[m], batch) for m in METHODS},
        num_params=sum(p.numel() for p in GPT(config).parameters()),
        backend=me.backend,
        batch=cli.batch,
        seq_len=config.seq_len,
        world_size=me.world_size,
    )


if __name__ == "__main__":
    main()
