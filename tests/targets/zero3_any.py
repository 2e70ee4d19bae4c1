"""Our ZeRO-3 beyond the course's defaults, against DDP, every sum in rank order (same bits):

* the usual mixed-precision layout: an fp32 RMSNorm in the root, the Embedding, every Block and the
  output Linear as 16-bit units (--dtype bfloat16 or float16), each unit gathered in its own dtype;
* any torch.optim optimizer over the shards: SGD with momentum and AdamW through `Zero3`, fp32.

Reported by every rank: each run's largest weight difference from its DDP and its units' dtypes.
"""

import argparse

import torch
from torch import nn

import zerobook as zb
from zerobook.data_parallel.ddp import average_gradients
from zerobook.train.models import GPT, Block, GPTConfig, next_token_loss
from zerobook.train.parity import ordered_sums
from zerobook.train.precision import MixedPrecisionAdamW
from zerobook.train.training import flat_weights, rank_batch
from zerobook.zero import Zero3

CONFIG = GPTConfig(vocab=64, hidden=32, layers=2, heads=4, seq_len=16)
STEPS, BATCH = 3, 2


class MixedLayout(nn.Module):
    """16-bit embedding, blocks and output layer; an fp32 RMSNorm before the output (the root)."""

    def __init__(self, config: GPTConfig, dtype):
        super().__init__()
        body = GPT(config)
        self.embed, self.blocks, self.positions = (
            body.embed.to(dtype),
            body.blocks.to(dtype),
            body.positions,
        )
        self.norm = nn.RMSNorm(config.hidden)  # stays fp32
        self.head = nn.Linear(config.hidden, config.vocab, bias=False).to(dtype)

    def forward(self, tokens):
        x = self.embed(tokens) + self.positions[: tokens.shape[1]].to(
            self.embed.weight.dtype
        )
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x.float()).to(x.dtype))


def train(model, optimizer, me: zb.Rank, ddp: bool) -> torch.Tensor:
    for step in range(STEPS):
        batch = rank_batch(CONFIG, BATCH, step, me)
        next_token_loss(model, batch).backward()
        if ddp:
            average_gradients(model)
        optimizer.step()
        optimizer.zero_grad()
    if not ddp:
        optimizer.gather_all()
    return flat_weights(model)


def mixed(dtype, me: zb.Rank) -> dict:
    """ZeRO-3 (AdamW) on the mixed layout against DDP with mixed-precision AdamW."""
    runs = {}
    for method in ("ddp", "zero3"):
        torch.manual_seed(0)
        model = MixedLayout(CONFIG, dtype)
        if method == "ddp":
            optimizer = MixedPrecisionAdamW(model.parameters(), lr=1e-2)
        else:
            optimizer = Zero3(
                model,
                (Block, nn.Embedding, nn.Linear),
                torch.optim.AdamW,
                lr=1e-2,
                weight_decay=0.01,
            )
        runs[method] = train(model, optimizer, me, method == "ddp")
        if method == "zero3":
            units = {u.name: str(u.flat.flat.dtype) for u in optimizer.units}
    return {"diff": (runs["zero3"] - runs["ddp"]).abs().max().item(), "units": units}


def any_optimizer(optimizer_class, options: dict, me: zb.Rank) -> dict:
    """ZeRO-3 with `optimizer_class` over the shards against DDP with it over the model, fp32."""
    runs = {}
    for method in ("ddp", "zero3"):
        torch.manual_seed(0)
        model = GPT(CONFIG)
        if method == "ddp":
            optimizer = optimizer_class(model.parameters(), **options)
        else:
            optimizer = Zero3(model, (Block,), optimizer_class, **options)
        runs[method] = train(model, optimizer, me, method == "ddp")
    return {"diff": (runs["zero3"] - runs["ddp"]).abs().max().item()}


def main() -> None:
    argparse.ArgumentParser().parse_args()
    me = zb.setup(verbose=False)
    with ordered_sums():
        report = {
            "bfloat16": mixed(torch.bfloat16, me),
            "float16": mixed(torch.float16, me),
            "sgd": any_optimizer(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, me),
            "adamw": any_optimizer(torch.optim.AdamW, {"lr": 1e-2}, me),
        }
    zb.report(**report)


if __name__ == "__main__":
    main()
