"""A small GPT-style transformer: a few million parameters, quick on a CPU, counted exactly.

Its parameter count is the textbook formula h*v + L*(12h^2 + 13h) + 2h: tied input/output
embeddings and fixed (sinusoidal) positions, so nothing outside the formula has parameters.
Attention is written out (`attention="manual"`), so that every tensor Korthikanti et al. count is
really saved for backward; `attention="sdpa"` uses PyTorch's fused kernel instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 256
    hidden: int = 256
    layers: int = 4
    heads: int = 4
    seq_len: int = 64
    attention: str = "manual"  # or "sdpa"


SHAPE = ("hidden", "layers", "heads", "seq_len")  # what a run's command line may set


def shape_options(parser, **defaults) -> None:
    """--hidden, --layers, --heads and --seq-len on an argparse parser: a GPT's shape (each
    default GPTConfig's unless `defaults` names it)."""
    for name in SHAPE:
        default = defaults.get(name, getattr(GPTConfig, name))
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)


def config_of(cli, **fields) -> GPTConfig:
    """The GPTConfig of a command line's shape options, and `fields` (attention, vocab)."""
    return GPTConfig(**{name: getattr(cli, name) for name in SHAPE}, **fields)


class SelfAttention(nn.Module):
    """Causal multi-head self-attention: one fused QKV projection and one output projection."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.heads, self.attention = config.heads, config.attention
        self.recompute_scores = (
            False  # selective recomputation: zerobook.train.recompute
        )
        self.qkv = nn.Linear(config.hidden, 3 * config.hidden)
        self.proj = nn.Linear(config.hidden, config.hidden)
        causal = torch.ones(config.seq_len, config.seq_len, dtype=torch.bool).tril()
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = (
            self.qkv(x)
            .view(b, s, 3, self.heads, h // self.heads)
            .permute(2, 0, 3, 1, 4)
        )
        if self.attention == "sdpa":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.recompute_scores:  # keep Q, K and V; backward recomputes the rest
            out = checkpoint(self.attend, q, k, v, use_reentrant=False)
        else:
            out = self.attend(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, s, h))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(causal(Q K^T / sqrt(d))) V: the a*s^2*b scores Korthikanti et al. count."""
        s = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~self.causal[:s, :s], float("-inf"))
        return scores.softmax(dim=-1) @ v


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x)); 12h^2 + 13h parameters."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(config.hidden), nn.LayerNorm(config.hidden)
        self.attn = SelfAttention(config)
        self.mlp = nn.Sequential(
            nn.Linear(config.hidden, 4 * config.hidden),
            nn.GELU(),
            nn.Linear(4 * config.hidden, config.hidden),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def sinusoidal_positions(seq_len: int, hidden: int) -> torch.Tensor:
    """Fixed position encodings (Vaswani et al. 2017): a buffer, not a parameter."""
    position = torch.arange(seq_len).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, hidden, 2) * (-math.log(10000.0) / hidden))
    table = torch.zeros(seq_len, hidden)
    table[:, 0::2], table[:, 1::2] = (
        torch.sin(position * frequency),
        torch.cos(position * frequency),
    )
    return table


class GPT(nn.Module):
    """Token embedding (tied to the output layer), L blocks, a final LayerNorm."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.hidden)
        self.register_buffer(
            "positions",
            sinusoidal_positions(config.seq_len, config.hidden),
            persistent=False,
        )
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.ln_f = nn.LayerNorm(config.hidden)
        nn.init.normal_(
            self.embed.weight, std=0.02
        )  # GPT-2's scale; N(0, 1) logits would be huge

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.positions[: tokens.shape[1]].to(
            self.embed.weight.dtype
        )
        for block in self.blocks:
            x = block(x)
        return (
            self.ln_f(x) @ self.embed.weight.T
        )  # logits, with the embedding's weights

    def loss(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy over a (batch, seq_len + 1) tensor of token ids."""
        return next_token_loss(self, tokens)


def next_token_loss(model, tokens: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of `model` (a GPT, or a wrapper such as DDP) predicting tokens[:, 1:]."""
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())


def random_batch(config: GPTConfig, batch: int, seed: int = 0) -> torch.Tensor:
    """Token ids (batch, seq_len + 1) from a fixed seed, the same on every rank that asks."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(config.vocab, (batch, config.seq_len + 1), generator=generator)
