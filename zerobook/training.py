"""What every training run of the course shares, on the rank side: this rank's slice of a global
batch, the model's weights as one flat tensor, and timed steps.

    tokens = rank_batch(config, per_rank=4, seed=step, me=me)   # (4, seq_len + 1) of 4 * N
    weights = flat_weights(model)                               # every parameter, flat, fp32
"""
from __future__ import annotations

import time

import torch

from zerobook.models import GPTConfig, next_token_loss, random_batch


def rank_batch(config: GPTConfig, per_rank: int, seed: int, me) -> torch.Tensor:
    """This rank's `per_rank` samples of the global batch of per_rank x world_size (seeded alike
    on every rank), on the rank's device: the data-parallel split."""
    tokens = random_batch(config, per_rank * me.world_size, seed=seed)
    return tokens[me.rank * per_rank:(me.rank + 1) * per_rank].to(me.device)


def flat_weights(model: torch.nn.Module, dtype=None) -> torch.Tensor:
    """Every parameter of `model`, flattened into one fp32 CPU tensor (rounded to `dtype` first,
    if given: what the forward computes with)."""
    return torch.cat([p.detach().to(dtype or p.dtype).float().reshape(-1).cpu() for p in model.parameters()])


def timed_steps(model, optimizer, batch: torch.Tensor, steps: int) -> list[float]:
    """Seconds of each of `steps` full training steps (forward, backward, step, zero_grad)."""
    out = []
    for _ in range(steps):
        if batch.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        next_token_loss(model, batch).backward()
        optimizer.step()
        optimizer.zero_grad()
        if batch.is_cuda:
            torch.cuda.synchronize()
        out.append(time.perf_counter() - start)
    return out
