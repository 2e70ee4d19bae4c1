"""ZeRO parity: the same AdamW steps under DDP, our stages 1, 2 and 3, our ShardedOptimizer and
PyTorch's ZeroRedundancyOptimizer; final weights, norms, optimizer bytes, traffic, gradient bytes.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.labs.zero_parity --dtype float32 --scenarios parity,clipped

Every method trains the same model (seed 0) on its rank's slice of each global batch, with what
real training uses: two parameter groups (no weight decay and half the learning rate for 1-D
tensors), one frozen tensor, the embedding tied to the output layer and two micro-batches per step.
Also run: stage 2 with `no_sync` for all but the last micro-batch, and stage 1 clipped by each
rank's *shard* norm (wrong, on purpose). Scenarios (`--scenarios`):

    parity   every sum in rank order (zerobook.parity.ordered_sums), no clipping: the same bits as DDP
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
from dataclasses import replace

import torch

import zerobook as zb
from zerobook import measure
from zerobook.comm import CommMeter
from zerobook.ddp import average_gradients
from zerobook.models import GPT, Block, GPTConfig, next_token_loss, random_batch
from zerobook.parity import ordered_sums
from zerobook.precision import MixedPrecisionAdamW
from zerobook.zero import ShardedOptimizer, Zero1AdamW, Zero2AdamW, Zero3AdamW

CONFIG = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)
LR, MAX_NORM, MICRO_BATCHES, MICRO_BATCH = 1e-3, 0.25, 2, 2
BUCKET_NUMEL = 2**13  # small, so that this small model has several buckets
ZERO = ("zero1", "zero2", "zero2_no_sync", "zero1_shard_norm", "zero3", "zero3_reshard_root", "zero3_offload")
EVERY_MICRO_BATCH = ("zero2", "zero3", "zero3_reshard_root", "zero3_offload")  # reduce in every backward
SCENARIOS = {"parity": (True, float("inf")), "clipped": (True, MAX_NORM), "native": (False, float("inf"))}


def groups_of(model) -> list[dict]:
    """Weight decay for matrices only, and half the learning rate for the 1-D tensors."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() > 1], "weight_decay": 0.1},
            {"params": [p for p in params if p.dim() <= 1], "weight_decay": 0.0, "lr": LR / 2}]


def optimizer_for(method: str, model):
    """The optimizer of each method, with the same AdamW settings."""
    groups = groups_of(model)
    if method in ("ddp", "ddp_every"):
        return MixedPrecisionAdamW(groups, lr=LR)
    if method in ("zero1", "zero1_shard_norm"):
        return Zero1AdamW(groups, lr=LR)
    if method.startswith("zero2"):
        return Zero2AdamW(groups, lr=LR, bucket_numel=BUCKET_NUMEL)
    if method.startswith("zero3"):  # one unit per transformer block, and the root
        return Zero3AdamW(model, unit_types=(Block,), groups=groups, lr=LR,
                          reshard_root=method == "zero3_reshard_root",
                          offload="cpu" if method == "zero3_offload" else None)  # host memory
    if method == "sharded":
        return ShardedOptimizer(groups, torch.optim.AdamW, lr=LR)
    from torch.distributed.optim import ZeroRedundancyOptimizer  # ~1 s of imports: only when asked

    optimizer = ZeroRedundancyOptimizer(groups[0]["params"], optimizer_class=torch.optim.AdamW,
                                        lr=LR, weight_decay=0.1)  # takes one group, then more
    optimizer.add_param_group(groups[1])
    return optimizer


def reference_of(method: str) -> str:
    """The DDP that reduces when `method` does: per micro-batch, or once per step (a DDP run is
    its own reference)."""
    if method.startswith("ddp"):
        return method
    return "ddp_every" if method in EVERY_MICRO_BATCH else "ddp"


def clip(method: str, model, optimizer, max_norm: float) -> float:
    """Clip by global norm, each method its own way; return the norm before clipping. With
    max_norm = inf the scale is exactly 1 (the norm is still computed and returned)."""
    if method == "zero1_shard_norm":  # the mistake: every rank clips by its own shard's norm
        grad = optimizer.reduced_grad()
        norm = grad.norm()
        grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm.item()
    if method in ZERO:
        return optimizer.clip_grad_norm_(max_norm).item()
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()


@torch.no_grad()
def average_each_micro_batch(model, sums: dict) -> None:
    """DDP without no_sync: average this micro-batch's gradients now, add them to `sums`."""
    average_gradients(model)
    for p in model.parameters():
        if p.grad is not None:
            sums[p] = p.grad if p not in sums else sums[p].add_(p.grad)
            p.grad = None


def backward(method: str, model, optimizer, batch) -> list:
    """The step's micro-batches; returns the gradient bytes held after each gradient arrived."""
    held, hooks = [], []
    if not method.startswith("zero2"):
        grads = lambda: [p.grad for p in model.parameters() if p.grad is not None]  # noqa: E731
        hooks = [p.register_post_accumulate_grad_hook(lambda _: held.append(measure.unique_bytes(grads())))
                 for p in model.parameters() if p.requires_grad]
    sums: dict = {}
    for index, micro in enumerate(batch.chunk(MICRO_BATCHES)):
        last = index == MICRO_BATCHES - 1
        with optimizer.no_sync() if method == "zero2_no_sync" and not last else contextlib.nullcontext():
            (next_token_loss(model, micro) / MICRO_BATCHES).backward()
        if method == "ddp_every":
            average_each_micro_batch(model, sums)
    for p, grad in sums.items():
        p.grad = grad
    for hook in hooks:
        hook.remove()
    return held if hooks else [b for event, b in optimizer.timeline if event.startswith("grad")]


def one_step(method: str, model, optimizer, batch, max_norm: float) -> dict:
    """Backward over the micro-batches, (all-reduce,) clip, step; what it held and sent."""
    with CommMeter() as meter:
        held = backward(method, model, optimizer, batch)
        if method not in ZERO and method != "ddp_every":
            average_gradients(model)  # ZeRO reduce-scatters the gradients itself
        norm = clip(method, model, optimizer, max_norm)
        optimizer.step()
    return {"norm": norm, "held": held, "traffic": meter.summary()}


def train(method: str, config: GPTConfig, dtype, steps: int, me: zb.Rank, max_norm: float = MAX_NORM) -> dict:
    torch.manual_seed(0)
    model = GPT(config).to(dtype)
    model.blocks[0].ln1.bias.requires_grad_(False)  # frozen: no gradient, no optimizer state
    optimizer = optimizer_for(method, model)
    size = MICRO_BATCHES * MICRO_BATCH
    norms = []
    for step in range(steps):
        if step:
            optimizer.zero_grad()  # not after the last step: its gradient peak is reported
        batch = random_batch(config, size * me.world_size, seed=step)[me.rank * size:(me.rank + 1) * size]
        last = one_step(method, model, optimizer, batch, max_norm)
        norms.append(last["norm"])
    if method.startswith("zero3"):
        optimizer.gather_all()  # to compare the full weights
    weights = torch.cat([p.detach().float().reshape(-1) for p in model.parameters()])
    local = optimizer.optim if method == "zero_ro" else optimizer  # ZeroRO's own local optimizer
    out = {"weights": weights, "optimizer_bytes": measure.unique_bytes(measure.optimizer_tensors(local)),
           "norms": norms, "traffic": last["traffic"], "held": last["held"]}
    if method.startswith("zero3"):
        out.update(padded=sum(u.flat.padded for u in optimizer.units),
                   persistent_bytes=measure.unique_bytes(optimizer.persistent_tensors()),
                   resident_bytes=measure.unique_bytes(optimizer.resident_tensors()),
                   offloaded_bytes=measure.unique_bytes(optimizer.offloaded_tensors()),
                   units={u.name: u.flat.padded for u in optimizer.units}, runs=len(optimizer.runs))
    elif method in ZERO:
        out.update(padded=optimizer.flat.padded, runs=len(optimizer.runs),
                   shard_numel=optimizer.flat.shard_numel, param_bytes=measure.unique_bytes(model.parameters()))
    if method.startswith("zero2"):
        out.update(peak=optimizer.peak_bytes, bucket_numels=[b.numel for b in optimizer.flat.buckets],
                   max_in_flight=optimizer.max_in_flight)
    return out


def run_scenario(name: str, methods: list[str], config: GPTConfig, dtype, steps: int, me: zb.Rank) -> dict:
    """Train every method (and the DDP references they need) under scenario `name`; each run's
    `diff` is its largest difference from its reference (0.0: the same bits)."""
    ordered, max_norm = SCENARIOS[name]
    needed = sorted({reference_of(m) for m in methods}) + [m for m in methods if not m.startswith("ddp")]
    with ordered_sums() if ordered else contextlib.nullcontext():
        runs = {m: train(m, config, dtype, steps, me, max_norm) for m in needed}
    references = {m: runs[m]["weights"] for m in ("ddp", "ddp_every") if m in runs}
    for method, run in runs.items():
        run["reference"] = reference_of(method)
        run["diff"] = (run.pop("weights") - references[run["reference"]]).abs().max().item()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--layers", type=int, default=CONFIG.layers)
    parser.add_argument("--methods", default="all", help="comma-separated; their DDP references are always run")
    parser.add_argument("--scenarios", nargs="+", default=["parity"], metavar="NAME[:METHODS]",
                        help=f"of {list(SCENARIOS)}, each with its own comma-separated methods if given")
    cli = parser.parse_args()
    me = zb.setup()
    dtype, config = getattr(torch, cli.dtype), replace(CONFIG, layers=cli.layers)
    runs = {}
    for scenario in cli.scenarios:
        name, _, methods = scenario.partition(":")
        methods = methods_of(methods or cli.methods, dtype, clipped=SCENARIOS[name][1] != float("inf"))
        runs[name] = run_scenario(name, methods, config, dtype, cli.steps, me)
    trainable = sum(p.numel() for p in GPT(config).parameters()) - config.hidden  # less the frozen bias
    zb.report(num_params=trainable, frozen=config.hidden, runs=runs, max_norm=MAX_NORM, bucket_numel=BUCKET_NUMEL,
              micro_batches=MICRO_BATCHES, element_size=torch.tensor([], dtype=dtype).element_size(),
              world_size=me.world_size, weight_scale=weight_scale(config))


def methods_of(spec: str, dtype, clipped: bool) -> list[str]:
    """The methods a scenario runs: "all" (those that apply to the dtype; the shard-norm mistake
    only when clipping), or a comma-separated list (DDP references are added as needed)."""
    if spec != "all":
        return [m for m in spec.split(",") if not m.startswith("ddp")]
    methods = [m for m in ZERO if (m != "zero3_offload" or dtype != torch.float32)
               and (m != "zero1_shard_norm" or clipped)]
    return methods + (["sharded", "zero_ro"] if dtype == torch.float32 else [])


def weight_scale(config: GPTConfig) -> float:
    """The largest initial weight (seed 0): the scale that differences are read against."""
    torch.manual_seed(0)
    return max(p.detach().abs().max().item() for p in GPT(config).parameters())


if __name__ == "__main__":
    main()
