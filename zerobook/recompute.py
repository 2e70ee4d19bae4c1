"""Activation checkpointing: keep each block's input, recompute the rest in backward.

    checkpoint_blocks(model)                   # every model.blocks[i], torch.utils.checkpoint
    checkpoint_blocks(model, reentrant=True)   # the older, reentrant implementation

Each block is wrapped in `Checkpointed`, whose forward runs the block under
`torch.utils.checkpoint.checkpoint`: forward keeps only the block's input (2sbh bytes in 16 bits:
Korthikanti et al. 2022's "full recomputation"), and backward runs the block's forward again just
before the block's backward. The block module itself is unchanged and called as a module, so its
hooks — ZeRO-3's gather and free — fire in the recomputation too (as with PyTorch's
`checkpoint_wrapper`).
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


def checkpoint_blocks(model: torch.nn.Module, reentrant: bool = False) -> torch.nn.Module:
    """Wrap every block of `model.blocks` in `Checkpointed` (in place); returns the model."""
    model.blocks = torch.nn.ModuleList(Checkpointed(block, reentrant) for block in model.blocks)
    return model
