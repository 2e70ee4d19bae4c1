"""Our ZeRO-3 and PyTorch's FSDP2 (`fully_shard`) on the same model, seed and data.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.fsdp2_side_by_side --dtype bfloat16

Both shard one unit per transformer block plus the root, reshard after forward (the root kept, as
FSDP2 does), and run the same AdamW. In fp32 everything is fp32. In bf16 (`--dtype bfloat16`) we
keep bf16 weights and gradient shards beside an fp32 master; FSDP2 keeps fp32 sharded parameters
and casts them to bf16 as it gathers (`MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)`);
DDP is `MixedPrecisionAdamW`. All start from the same bf16-representable weights.
`--dtype float32,bfloat16` runs both in one launch and reports each under `by_dtype[name]`. Every sum is
taken in rank order (`zerobook.train.parity.ordered_sums`; `--sums native` for gloo's own orders), so
the three must end with the same bits. Reported by every rank, per method: the loss at every
step, the final weights' largest difference from DDP,
the traffic of the last step (the meter wraps torch.distributed's Python calls, which FSDP2's
collectives go through), the bytes the rank keeps (weights, gradients, optimizer state: local
shards of FSDP2's DTensors, counted once per storage), the median step time, and the FLOPs of
the first step's forward and backward (torch.utils.flop_counter counts the matrix products).
"""

import argparse
import contextlib
import statistics
import time
from dataclasses import asdict, dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

import zerobook as zb
from zerobook.data_parallel.ddp import average_gradients
from zerobook.fsdp2 import full_weights, measured_step, shard_blocks
from zerobook.train.models import GPT, Block, GPTConfig
from zerobook.train.parity import ordered_sums
from zerobook.train.precision import MixedPrecisionAdamW
from zerobook.train.training import rank_batch
from zerobook.zero import Zero3AdamW

LR, BATCH = 1e-3, 4


def model_config(layers: int = 2) -> GPTConfig:
    """The model every method trains here (tests that check its bytes build the same one)."""
    return GPTConfig(vocab=128, hidden=64, layers=layers, heads=4, seq_len=32)


@dataclass
class Report:
    """What every rank reports: `runs[method]` (ddp, ours, fsdp2) holds `losses`, `diff` from
    DDP's final weights, `kept_bytes`, `traffic` of the last step and the median step `seconds`."""

    runs: dict
    dtype: str
    sums: str
    num_params: int


def build(method: str, config: GPTConfig, dtype, me: zb.Rank):
    """(model, optimizer, reduce) for one method, from seed 0; reduce averages DDP's gradients."""
    torch.manual_seed(0)
    model = (
        GPT(config).to(dtype).to(me.device)
    )  # weights rounded to `dtype` for every method
    if method == "ours":
        return model, Zero3AdamW(model, unit_types=(Block,), lr=LR), None
    if method == "fsdp2":
        model.float()  # FSDP2 keeps the fp32 shard itself and casts to `dtype` when it gathers
        shard_blocks(model, me, dtype)
    if dtype != torch.float32 and method == "ddp":
        return (
            model,
            MixedPrecisionAdamW(model.parameters(), lr=LR, weight_decay=0.01),
            average_gradients,
        )
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    return model, optimizer, (average_gradients if method == "ddp" else None)


def train(method: str, config: GPTConfig, dtype, steps: int, me: zb.Rank) -> dict:
    model, optimizer, reduce = build(method, config, dtype, me)
    losses, seconds = [], []
    flops = FlopCounterMode(
        display=False
    )  # counts the first step's FLOPs (its time is not used)
    for step in range(steps):
        tokens = rank_batch(config, BATCH, step, me)
        start = time.perf_counter()
        with flops if step == 0 else contextlib.nullcontext():
            loss, meter, kept = measured_step(model, optimizer, tokens, reduce)
        seconds.append(time.perf_counter() - start)
        losses.append(loss.item())
    return {
        "losses": losses,
        "weights": full_weights(model, optimizer, dtype),
        "kept_bytes": kept,
        "traffic": meter.summary(),
        "seconds": statistics.median(seconds[1:] or seconds),
        "flops": flops.get_total_flops(),
    }


def compare(
    config: GPTConfig, dtype, steps: int, me: zb.Rank, ordered: bool = True
) -> dict:
    """DDP, ours and FSDP2 trained alike; each run's `diff` from DDP's final weights."""
    with ordered_sums() if ordered else contextlib.nullcontext():
        runs = {m: train(m, config, dtype, steps, me) for m in ("ddp", "ours", "fsdp2")}
    reference = runs["ddp"]["weights"]
    for run in runs.values():
        run["diff"] = (run.pop("weights") - reference).abs().max().item()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument(
        "--dtype",
        default="float32",
        help="float32, bfloat16, or both in one launch (float32,bfloat16: reported by_dtype)",
    )
    parser.add_argument("--sums", choices=["ordered", "native"], default="ordered")
    cli = parser.parse_args()
    dtypes = cli.dtype.split(",")
    if not set(dtypes) <= {"float32", "bfloat16"}:
        parser.error(f"--dtype: float32 and/or bfloat16, not {cli.dtype!r}")
    me = zb.setup()
    config = model_config(cli.layers)
    psi = sum(p.numel() for p in GPT(config).parameters())
    reports = {
        name: asdict(
            Report(
                compare(
                    config,
                    getattr(torch, name),
                    cli.steps,
                    me,
                    ordered=cli.sums == "ordered",
                ),
                name,
                cli.sums,
                psi,
            )
        )
        for name in dtypes
    }
    if len(dtypes) == 1:
        zb.report(**reports[dtypes[0]])
    else:
        zb.report(by_dtype=reports)


if __name__ == "__main__":
    main()
