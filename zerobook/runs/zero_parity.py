"""ZeRO parity: the same AdamW steps under DDP, our stages 1, 2 and 3, our ShardedOptimizer and
PyTorch's ZeroRedundancyOptimizer (the methods: zerobook.train.training_methods); final weights,
norms, optimizer bytes, traffic, gradient bytes.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.zero_parity --dtype float32 --scenarios parity,clipped

Every method trains the same model (seed 0) on its rank's slice of each global batch, with what
real training uses: two parameter groups (no weight decay and half the learning rate for 1-D
tensors), one frozen tensor, the embedding tied to the output layer and two micro-batches per step.
Also run: stage 2 with `no_sync` for all but the last micro-batch, and stage 1 clipped by each
rank's *shard* norm (wrong, on purpose). Scenarios (`--scenarios`):

    parity   every sum in rank order (zerobook.train.parity.ordered_sums), no clipping: the same bits as DDP
    clipped  rank order, clipped by global norm: the norm's own sum differs (shards vs tensors)
    native   gloo's own orders, no clipping: what rounding alone does

Each method is compared with the DDP that reduces as it does: once per step after accumulating
(`ddp`), or once per micro-batch (`ddp_every`, DDP without no_sync) for stage 2 without no_sync
and stage 3, which reduce-scatter in every backward. Reported by every rank, per scenario and
method: the largest difference from that reference, the norm at every step, its optimizer bytes,
the traffic of its last step and the gradient bytes held during that step.
"""

import argparse
import contextlib
from dataclasses import asdict, dataclass, replace

import torch

import zerobook as zb
from zerobook.train import measure
from zerobook.data_parallel.comm import CommMeter
from zerobook.data_parallel.ddp import average_gradients
from zerobook.train.models import GPT, GPTConfig, next_token_loss
from zerobook.train.parity import ordered_sums
from zerobook.train.training_methods import (
    BUCKET_NUMEL,
    METHODS,
    Method,
    clip,
    groups_of,
)
from zerobook.train.training import flat_weights, rank_batch
from zerobook.zero import Zero1AdamW, Zero2AdamW, Zero3

CONFIG = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)
MAX_NORM, MICRO_BATCHES, MICRO_BATCH = 0.25, 2, 2
SCENARIOS = {
    "parity": (True, float("inf")),
    "clipped": (True, MAX_NORM),
    "native": (False, float("inf")),
}


@dataclass
class Report:
    """What every rank reports (result.ranks[r] holds these keys): `runs[scenario][method]` holds
    each run's `diff` from its `reference`, `norms`, `traffic`, gradient bytes `held`,
    `optimizer_bytes` and its shards' layout (`padded`, `runs`, ...)."""

    runs: dict
    num_params: int  # trainable: the frozen bias left out
    frozen: int
    max_norm: float
    bucket_numel: int
    micro_batches: int
    element_size: int
    world_size: int
    weight_scale: float


@torch.no_grad()
def average_each_micro_batch(model, sums: dict) -> None:
    """DDP without no_sync: average this micro-batch's gradients now, add them to `sums`."""
    average_gradients(model, flat=True)
    for p in model.parameters():
        if p.grad is not None:
            sums[p] = p.grad if p not in sums else sums[p].add_(p.grad)
            p.grad = None


def gradient_bytes_recorder(model, held: list) -> list:
    """Hooks that append the bytes of every gradient alive after each gradient arrives."""
    params = list(
        model.parameters()
    )  # once: walking the module tree at every hook costs O(P^2)
    grads = lambda: [p.grad for p in params if p.grad is not None]  # noqa: E731
    return [
        p.register_post_accumulate_grad_hook(
            lambda _: held.append(measure.unique_bytes(grads()))
        )
        for p in params
        if p.requires_grad
    ]


def backward(method: Method, model, optimizer, batch) -> list:
    """The step's micro-batches; returns the gradient bytes held after each gradient arrived."""
    held, stage2 = [], isinstance(optimizer, Zero2AdamW)
    hooks = [] if stage2 else gradient_bytes_recorder(model, held)
    sums: dict = {}
    for index, micro in enumerate(batch.chunk(MICRO_BATCHES)):
        last = index == MICRO_BATCHES - 1
        with (
            optimizer.no_sync()
            if method.no_sync and not last
            else contextlib.nullcontext()
        ):
            (next_token_loss(model, micro) / MICRO_BATCHES).backward()
        if method.averages == "micro-batch":
            average_each_micro_batch(model, sums)
    for p, grad in sums.items():
        p.grad = grad
    for hook in hooks:
        hook.remove()
    return (
        [b for event, b in optimizer.timeline if event.startswith("grad")]
        if stage2
        else held
    )


def one_step(method: Method, model, optimizer, batch, max_norm: float) -> dict:
    """Backward over the micro-batches, (all-reduce,) clip, step; what it held and sent."""
    with CommMeter() as meter:
        held = backward(method, model, optimizer, batch)
        if method.averages == "step":
            average_gradients(model, flat=True)
        norm = clip(method, model, optimizer, max_norm)
        optimizer.step()
    return {"norm": norm, "held": held, "traffic": meter.summary()}


def layout(model, optimizer) -> dict:
    """What a ZeRO optimizer's shards look like, and the bytes it keeps where."""
    if isinstance(optimizer, Zero3):
        return dict(
            padded=sum(u.flat.padded for u in optimizer.units),
            runs=len(optimizer.runs),
            persistent_bytes=measure.unique_bytes(optimizer.persistent_tensors()),
            resident_bytes=measure.unique_bytes(optimizer.resident_tensors()),
            offloaded_bytes=measure.unique_bytes(optimizer.offloaded_tensors()),
            units={u.name: u.flat.padded for u in optimizer.units},
        )
    out = {}
    if isinstance(optimizer, Zero1AdamW):  # stage 1, and stage 2 built on it
        out.update(
            padded=optimizer.flat.padded,
            runs=len(optimizer.runs),
            shard_numel=optimizer.flat.shard_numel,
            param_bytes=measure.unique_bytes(model.parameters()),
        )
    if isinstance(optimizer, Zero2AdamW):
        out.update(
            peak=optimizer.peak_bytes,
            bucket_numels=[b.numel for b in optimizer.flat.buckets],
            max_in_flight=optimizer.max_in_flight,
        )
    return out


def train(
    name: str,
    config: GPTConfig,
    dtype,
    steps: int,
    me: zb.Rank,
    max_norm: float = MAX_NORM,
) -> dict:
    """`steps` steps of method `name` from seed 0; its final weights, norms, bytes and traffic."""
    method = METHODS[name]
    torch.manual_seed(0)
    model = GPT(config).to(device=me.device, dtype=dtype)
    model.blocks[0].ln1.bias.requires_grad_(
        False
    )  # frozen: no gradient, no optimizer state
    optimizer = method.optimizer(model, groups_of(model))
    norms = []
    for step in range(steps):
        if step:
            optimizer.zero_grad()  # not after the last step: its gradient peak is reported
        last = one_step(
            method,
            model,
            optimizer,
            rank_batch(config, MICRO_BATCHES * MICRO_BATCH, step, me),
            max_norm,
        )
        norms.append(last["norm"])
    if isinstance(optimizer, Zero3):
        optimizer.gather_all()  # to compare the full weights
    local = method.local(optimizer)
    return {
        "weights": flat_weights(model),
        "norms": norms,
        "traffic": last["traffic"],
        "held": last["held"],
        "optimizer_bytes": measure.unique_bytes(measure.optimizer_tensors(local)),
        **layout(model, optimizer),
    }


def run_scenario(
    name: str, methods: list[str], config: GPTConfig, dtype, steps: int, me: zb.Rank
) -> dict:
    """Train every method (and the DDP references they need) under scenario `name`; each run's
    `diff` is its largest difference from its reference (0.0: the same bits)."""
    ordered, max_norm = SCENARIOS[name]
    needed = sorted({METHODS[m].reference for m in methods}) + [
        m for m in methods if not m.startswith("ddp")
    ]
    with ordered_sums() if ordered else contextlib.nullcontext():
        runs = {m: train(m, config, dtype, steps, me, max_norm) for m in needed}
    references = {m: runs[m]["weights"] for m in ("ddp", "ddp_every") if m in runs}
    for method, run in runs.items():
        run["reference"] = (
            METHODS[method].reference if not method.startswith("ddp") else method
        )
        run["diff"] = (
            (run.pop("weights") - references[run["reference"]]).abs().max().item()
        )
    return runs


def methods_of(spec: str, dtype, clipped: bool) -> list[str]:
    """The methods a scenario runs: "all" (those that apply to the dtype; the shard-norm mistake
    only when clipping), or a comma-separated list (DDP references are added as needed)."""
    if spec != "all":
        return [m for m in spec.split(",") if not m.startswith("ddp")]
    fp32_only, fp16_only = ("sharded", "zero_ro"), ("zero3_offload",)
    return [
        m
        for m in METHODS
        if not m.startswith("ddp")
        and (clipped or not METHODS[m].shard_norm)
        and m not in (fp16_only if dtype == torch.float32 else fp32_only)
    ]


def weight_scale(config: GPTConfig) -> float:
    """The largest initial weight (seed 0): the scale that differences are read against."""
    torch.manual_seed(0)
    return max(p.detach().abs().max().item() for p in GPT(config).parameters())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--layers", type=int, default=CONFIG.layers)
    parser.add_argument(
        "--methods",
        default="all",
        help="comma-separated; their DDP references are always run",
    )
    parser.add_argument(
        "--scenarios",
        nargs="+",
        default=["parity"],
        metavar="NAME[:METHODS]",
        help=f"of {list(SCENARIOS)}, each with its own comma-separated methods if given",
    )
    cli = parser.parse_args()
    me = zb.setup()
    dtype, config = getattr(torch, cli.dtype), replace(CONFIG, layers=cli.layers)
    runs = {}
    for scenario in cli.scenarios:
        name, _, methods = scenario.partition(":")
        methods = methods_of(
            methods or cli.methods, dtype, clipped=SCENARIOS[name][1] != float("inf")
        )
        runs[name] = run_scenario(name, methods, config, dtype, cli.steps, me)
    trainable = (
        sum(p.numel() for p in GPT(config).parameters()) - config.hidden
    )  # less the frozen bias
    zb.report(
        **asdict(
            Report(
                runs,
                trainable,
                config.hidden,
                MAX_NORM,
                BUCKET_NUMEL,
                MICRO_BATCHES,
                torch.tensor([], dtype=dtype).element_size(),
                me.world_size,
                weight_scale(config),
            )
        )
    )


if __name__ == "__main__":
    main()
