"""Activation checkpointing: keep each block's input, recompute the rest in backward.

    checkpoint_blocks(model)                   # every model.blocks[i], torch.utils.checkpoint
    checkpoint_blocks(model, reentrant=True)   # the older, reentrant implementation
    recompute_attention_scores(model)          # selective: only attention's s x s scores

Each block is wrapped in `Checkpointed`, whose forward runs the block under
`torch.utils.checkpoint.checkpoint`: forward keeps only the block's input (2sbh bytes in 16 bits:
Korthikanti et al. 2022's "full recomputation"), and backward runs the block's forward again just
before the block's backward. The block module itself is unchanged and called as a module, so its
hooks — ZeRO-3's gather and free — fire in the recomputation too (as with PyTorch's
`checkpoint_wrapper`).

`recompute_attention_scores` is Korthikanti et al.'s *selective* recomputation: every block
keeps its activations except attention's scores and probabilities (a*s^2*b values each), which
backward recomputes from Q, K and V. No weights take part, so under ZeRO-3 it gathers nothing.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint


class Checkpointed(torch.nn.Module):
    """A block whose activations are recomputed in backward instead of kept."""

    def __init__(self, block: torch.nn.Module, reentrant: bool = False):
        super().__init__()
        self.block, self.reentrant = block, reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=self.reentrant)


def checkpoint_blocks(
    model: torch.nn.Module, reentrant: bool = False
) -> torch.nn.Module:
    """Wrap every block of `model.blocks` in `Checkpointed` (in place); returns the model."""
    model.blocks = torch.nn.ModuleList(
        Checkpointed(block, reentrant) for block in model.blocks
    )
    return model


def recompute_attention_scores(model: torch.nn.Module) -> torch.nn.Module:
    """Selective recomputation in every block of `model.blocks` (in place); returns the model."""
    for block in model.blocks:
        block.attn.recompute_scores = True
    return model
