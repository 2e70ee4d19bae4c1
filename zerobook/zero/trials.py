"""What the ZeRO++ runs (zerobook.runs.zeropp_qwz, _hpz, _qgz) share: the capstone's byte-level
GPT in bf16 under our ZeRO-3 with a part's unit class, and its training loss step by step."""

import argparse
import math

import torch

import zerobook as zb

from zerobook.train.capstone_train import rank_rows
from zerobook.train.models import GPT, Block, GPTConfig, next_token_loss
from zerobook.zero import Zero3AdamW

CONFIG = GPTConfig(vocab=256, hidden=64, layers=2, heads=4, seq_len=64)


def bf16_gpt(device="cpu") -> GPT:
    """The GPT from seed 0 (drawn on the CPU, whatever the device), in bf16 on `device`."""
    torch.manual_seed(0)
    return GPT(CONFIG).to(device, torch.bfloat16)


def zero3(unit_cls=None, device="cpu"):
    """(model, optimizer): bf16_gpt(device) under Zero3AdamW, units of `unit_cls`."""
    model = bf16_gpt(device)
    unit = {"unit_cls": unit_cls} if unit_cls else {}
    return model, Zero3AdamW(model, unit_types=(Block,), lr=3e-3, **unit)


def batch(data, step: int, me, rows: int):
    """This rank's rows of global batch `step` of real text (rows x N windows)."""
    return rank_rows(data, step, me, 0, rows, CONFIG.seq_len)


def train_curves(me, data, ways: dict, steps: int, rows: int) -> dict:
    """way -> the training loss of each of `steps` steps (bits per byte), `ways` mapping a name
    to its unit class (None: ZeRO-3's own)."""
    curves = {}
    for way, unit_cls in ways.items():
        model, zero = zero3(unit_cls, me.device)
        curve = []
        for step in range(steps):
            loss = next_token_loss(model, batch(data, step, me, rows))
            loss.backward()
            zero.step()
            zero.zero_grad()
            curve.append(loss.item() / math.log(2))
        curves[way] = curve
    return curves


def start(doc: str, **defaults):
    """(command line, this rank, the text): `--node-size` (2: two "nodes" of two ranks) and
    `defaults` as options of their own (--steps 30, ...), then zb.setup and zerobook.train.text."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--node-size", type=int, default=2)
    for name, value in defaults.items():
        parser.add_argument(f"--{name}", type=type(value), default=value)
    cli = parser.parse_args()
    me = zb.setup(verbose=False)
    return cli, me, zb.train.text.load()[0]
