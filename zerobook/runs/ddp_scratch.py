"""Data parallelism from scratch: K training steps, and the same K steps on one process.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.ddp_scratch --modes naive,bucketed,overlap,torch

Every rank starts from its own random weights, takes rank 0's (broadcast), trains on its slice of
each global batch, and averages gradients with all-reduce (mode `naive`: one per parameter
after backward; `bucketed`: 1 MiB buckets after backward; `overlap`: the same buckets during
backward; `torch`: torch.nn.parallel.DistributedDataParallel). Each mode trains twice: once with
gloo's own sums, timed, and once with every sum in rank order (zerobook.train.parity.ordered_sums; a
comm hook does it inside DDP), which rank 0 compares with two single-process runs: one that
computes each rank's slice's gradient and averages them in rank order (the same arithmetic: the
same bits), and one on the whole global batch at once (the same mathematics; its sums run inside
the kernels, in their own order). Reported: the largest differences from both and across ranks,
the median step time and the range of the steps after the first, and the bytes of each all-reduce
of a step (`messages`).
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import zerobook as zb
from zerobook.data_parallel.ddp import (
    OverlappedAllReduce,
    average_gradients,
    broadcast_params,
)
from zerobook.train.models import GPT, GPTConfig, next_token_loss, random_batch
from zerobook.train.parity import ordered_comm_hook, ordered_sums, rank_order_sum
from zerobook.train.training import flat_weights, rank_batch

CONFIG = GPTConfig(vocab=128, hidden=128, layers=2, heads=4, seq_len=32)
MODES = ["naive", "bucketed", "overlap", "torch"]


def message_bytes(model, wrapped, buckets) -> list[int]:
    """Bytes of each all-reduce of one step: one per parameter (`naive`), one per bucket of ours,
    or one per bucket of DDP (as its reducer rebuilt them after the first step)."""
    if buckets is not None:
        return [
            sum(p.numel() * p.element_size() for p in bucket)
            for bucket in buckets.buckets
        ]
    if wrapped is not model:
        data = wrapped._get_ddp_logging_data()
        sizes = (
            data.get("rebuilt_bucket_sizes") or data["bucket_sizes"]
        )  # rebuilt after step 1
        return [int(size) for size in sizes.split(",")]
    return [p.numel() * p.element_size() for p in model.parameters()]


def train(
    model, steps: int, per_rank: int, me: zb.Rank, mode: str, ordered: bool = False
):
    """`steps` SGD steps on this rank's slice of each global batch; returns the step times and
    the bytes of each all-reduce of a step (message_bytes)."""
    wrapped = DistributedDataParallel(model) if mode == "torch" else model
    if mode == "torch" and ordered:
        wrapped.register_comm_hook(
            None, ordered_comm_hook
        )  # DDP's reducer calls gloo directly
    buckets = (
        OverlappedAllReduce(model, overlap=mode == "overlap")
        if mode in ("bucketed", "overlap")
        else None
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    times = []
    for step in range(steps):
        mine = rank_batch(CONFIG, per_rank, 1000 + step, me)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        next_token_loss(wrapped, mine).backward()
        if mode == "naive":
            average_gradients(model)
        elif buckets is not None:
            buckets.finish()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return times, message_bytes(model, wrapped, buckets)


def single_process(
    initial: dict, steps: int, batch_size: int, device: str
) -> torch.Tensor:
    """The same steps on one process, each on the whole global batch."""
    model = GPT(CONFIG).to(device)
    model.load_state_dict(initial)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        optimizer.zero_grad()
        next_token_loss(
            model, random_batch(CONFIG, batch_size, seed=1000 + step).to(device)
        ).backward()
        optimizer.step()
    return flat_weights(model)


def slices_in_rank_order(
    initial: dict, steps: int, per_rank: int, world_size: int, device: str
) -> torch.Tensor:
    """The same steps on one process (on the ranks' kind of device), each rank's slice's gradient
    computed on its own and the N averaged as the ordered all-reduce does: added in rank order,
    then divided by N."""
    model = GPT(CONFIG).to(device)
    model.load_state_dict(initial)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    params = list(model.parameters())
    for step in range(steps):
        batch = random_batch(CONFIG, per_rank * world_size, seed=1000 + step).to(device)
        grads = []
        for r in range(world_size):
            model.zero_grad(set_to_none=True)
            next_token_loss(model, batch[r * per_rank : (r + 1) * per_rank]).backward()
            grads.append([p.grad.reshape(-1) for p in params])
        for index, p in enumerate(params):
            p.grad = (
                rank_order_sum(torch.stack([g[index] for g in grads]))
                .div_(world_size)
                .view_as(p)
            )
        optimizer.step()
    return flat_weights(model)


def start(me: zb.Rank):
    """Every rank from its own random weights, then rank 0's (broadcast); the initial state."""
    torch.manual_seed(
        100 + me.rank
    )  # different on purpose: the broadcast makes them equal
    model = GPT(CONFIG).to(me.device)
    broadcast_params(model)
    return model, {k: v.clone() for k, v in model.state_dict().items()}


def run_mode(mode: str, cli, me: zb.Rank) -> dict:
    """Train one replica set with `mode` twice: timed with gloo's sums, and with ordered sums
    compared with the single-process runs (on rank 0) and across ranks."""
    model, _ = start(me)
    times, messages = train(model, cli.steps, cli.per_rank, me, mode)
    model, initial = start(me)
    with ordered_sums():
        train(model, cli.steps, cli.per_rank, me, mode, ordered=True)
    weights = flat_weights(model)
    spread = weights.to(me.device)
    dist.all_reduce(spread, op=dist.ReduceOp.MAX)
    steady = (
        times[1:] or times
    )  # the first step also builds buckets (DDP rebuilds them after it)
    result = {
        "step_seconds": statistics.median(steady),
        "step_range": [min(steady), max(steady)],
        "messages": messages,
        "across_ranks": (spread.cpu() - weights).abs().max().item(),
    }
    if me.is_main:
        same_order = slices_in_rank_order(
            initial, cli.steps, cli.per_rank, me.world_size, me.device
        )
        whole = single_process(
            initial, cli.steps, cli.per_rank * me.world_size, me.device
        )
        result.update(
            vs_same_order=(weights - same_order).abs().max().item(),
            vs_single_process=(weights - whole).abs().max().item(),
            weight_scale=whole.abs().max().item(),
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument(
        "--per-rank", type=int, default=4, help="samples per rank per step"
    )
    parser.add_argument("--modes", default="naive", help=f"comma-separated, of {MODES}")
    cli = parser.parse_args()
    me = zb.setup()
    zb.report(**{mode: run_mode(mode, cli, me) for mode in cli.modes.split(",")})


if __name__ == "__main__":
    main()
