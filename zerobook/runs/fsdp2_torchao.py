"""torchao's own FP8 training under FSDP2, beside the same GPT in bf16: the blocks' Linear layers
converted by `torchao.float8.convert_to_float8_training` with `enable_fsdp_float8_all_gather`,
so FSDP2 all-gathers their weights in float8 e4m3 and the matmuls run in FP8 (`torch._scaled_mm`),
the scales computed once a step after the optimizer (`precompute_float8_dynamic_scale_for_fsdp`,
as torchtitan does). zerobook.runs.fsdp2_float8 builds the gather itself; this is the library.
torchao is not one of the course's requirements: `make gpu-check` runs this where it is installed.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.fsdp2_torchao

Reports, per way (bf16, float8) on rank 0: the last step's all-gathers and all-reduces (calls and
bytes, CommMeter: all_gather_into_tensor's bytes are what this rank receives), the median step's
seconds after two warm-up steps (CUDA-synchronized on a GPU; `--compile`: each block compiled, as
torchao advises), and each step's loss.
"""

import argparse
import statistics
import time

import torch

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.fsdp2 import shard_blocks
from zerobook.train.models import (
    GPT,
    GPTConfig,
    config_of,
    next_token_loss,
    shape_options,
)
from zerobook.train.training import rank_batch

COUNTED = ("all_gather_into_tensor", "all_reduce", "reduce_scatter_tensor")


def float8_blocks(model: GPT) -> None:
    """torchao's Float8Linear in place of every Linear of the blocks, gathered in float8."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    config = Float8LinearConfig(enable_fsdp_float8_all_gather=True)
    for block in model.blocks:
        convert_to_float8_training(block, config=config)


def train(me, config: GPTConfig, batch: int, steps: int, float8: bool, compile_: bool):
    """`steps` steps of AdamW on random tokens; the last step's collectives counted."""
    torch.manual_seed(0)
    model = GPT(config).to(me.device)
    rescale = None  # FP8: its scales, computed once a step after the optimizer
    if float8:
        from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp as rescale

        float8_blocks(model)
    if compile_:
        for block in model.blocks:
            block.compile()
    shard_blocks(model, me, dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sync = torch.cuda.synchronize if me.device.startswith("cuda") else (lambda: None)
    losses, seconds = [], []
    for step in range(steps):
        sync()
        began = time.perf_counter()
        with CommMeter() as meter:
            loss = next_token_loss(model, rank_batch(config, batch, step, me))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if rescale:
                rescale(model)
        sync()
        seconds.append(time.perf_counter() - began)
        losses.append(loss.item())
    counted = meter.summary()
    return {
        "losses": losses,
        "step_s": statistics.median(seconds[2:] or seconds),
        **{
            f"{op}_{what}": counted.get(op, {}).get(what, 0)
            for op in COUNTED
            for what in ("calls", "bytes")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    shape_options(parser, hidden=64, layers=2, seq_len=32)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--compile", action="store_true")
    cli = parser.parse_args()
    me = zb.setup(verbose=False)
    config = config_of(cli)
    with torch.device("meta"):  # counted, not built
        parameters = sum(p.numel() for p in GPT(config).parameters())
    zb.report(
        parameters=parameters,
        config=vars(cli),
        **{
            way: train(me, config, cli.batch, cli.steps, way == "float8", cli.compile)
            for way in ("bf16", "float8")
        },
    )


if __name__ == "__main__":
    main()
