"""ZeRO++'s qwZ on our ZeRO-3 (zerobook.zero.quantized): the bytes its all-gathers send, the
error of block quantization against the block size, and a short training on real text with and
without it.

    python -m torch.distributed.run --standalone --nproc-per-node 3 -m zerobook.runs.zeropp_qwz

Every rank reports:
  bytes   one step of a bf16 GPT, ZeRO-3 and ZeRO-3 with qwZ (blocks of 256): bytes per
          collective (the CommMeter), and each unit's elements (padded to N)
  error   each unit's weights quantized in blocks of 32 to 16,384: the largest error over its
          bound (half its block's step, max|block| / 254) and the mean error over the mean |w|
  train   `--steps` steps of the capstone's byte-level GPT on real text (zerobook.train.text), bf16,
          both ways: the loss of every step, in bits per byte
"""

import argparse

import torch

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.train.models import next_token_loss
from zerobook.zero.trials import batch, bf16_gpt, train_curves, zero3
from zerobook.zero.quantized import dequantize_blocks, quantize_blocks, quantized_unit

BLOCK, BLOCKS = 256, (32, 256, 2048, 16384)


def bytes_part(me, data) -> dict:
    out = {}
    for quantized in (False, True):
        model, zero = zero3(quantized_unit(BLOCK) if quantized else None, me.device)
        with CommMeter() as meter:
            next_token_loss(model, batch(data, 0, me, 12)).backward()
            zero.step()
        out["qwZ" if quantized else "ZeRO-3"] = meter.summary()
    out["units"] = {u.name: u.flat.padded for u in zero.units}  # elements, padded to N
    return out


def error_part(me) -> dict:
    """Each block size: the worst error over its bound, and the mean error over the mean |w|."""
    weights = torch.cat(
        [p.detach().float().reshape(-1) for p in bf16_gpt().parameters()]
    )
    out = {}
    for block in BLOCKS:
        codes, scales = quantize_blocks(weights, block)
        back = dequantize_blocks(codes, scales, weights.numel(), torch.float32)
        error = (back - weights).abs()
        bound = (scales / 2).repeat_interleave(block)[: weights.numel()]
        out[block] = {
            "worst_over_bound": (error / bound).max().item(),
            "mean_relative": (error.mean() / weights.abs().mean()).item(),
        }
    return out


def train_part(me, data, steps: int) -> dict:
    ways = {"ZeRO-3": None, "qwZ": quantized_unit(BLOCK)}
    return train_curves(me, data, ways, steps, rows=12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="bytes,error,train")
    parser.add_argument("--steps", type=int, default=30)
    cli = parser.parse_args()
    me = zb.setup(verbose=False)
    data, _ = zb.train.text.load()
    parts = {
        "bytes": lambda: bytes_part(me, data),
        "error": lambda: error_part(me),
        "train": lambda: train_part(me, data, cli.steps),
    }
    zb.report(
        world_size=me.world_size,
        block=BLOCK,
        **{name: parts[name]() for name in cli.parts.split(",")},
    )


if __name__ == "__main__":
    main()
