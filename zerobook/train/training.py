"""What every training run of the course shares, on the rank side: this rank's slice of a global
batch, one training step, the model's weights as one flat tensor, and timed steps.

    tokens = rank_batch(config, per_rank=4, seed=step, me=me)   # (4, seq_len + 1) of 4 * N
    loss = train_step(model, optimizer, tokens, reduce=average_gradients)
    weights = flat_weights(model)                               # every parameter, flat, fp32
"""

from __future__ import annotations

import time

import torch

from zerobook.train.models import GPTConfig, next_token_loss, random_batch


def rank_batch(config: GPTConfig, per_rank: int, seed: int, me) -> torch.Tensor:
    """This rank's `per_rank` samples of the global batch of per_rank x world_size (seeded alike
    on every rank), on the rank's device: the data-parallel split."""
    tokens = random_batch(config, per_rank * me.world_size, seed=seed)
    return tokens[me.rank * per_rank : (me.rank + 1) * per_rank].to(me.device)


def flat_weights(model: torch.nn.Module, dtype=None) -> torch.Tensor:
    """Every parameter of `model`, flattened into one fp32 CPU tensor (rounded to `dtype` first,
    if given: what the forward computes with)."""
    return torch.cat(
        [
            p.detach().to(dtype or p.dtype).float().reshape(-1).cpu()
            for p in model.parameters()
        ]
    )


def train_step(model, optimizer, tokens: torch.Tensor, reduce=None) -> float:
    """One training step on `tokens`: forward, backward, `reduce(model)` if given (DDP's average
    of the gradients; ZeRO and FSDP reduce in backward), the optimizer's step, zero_grad. Returns
    the loss."""
    loss = next_token_loss(model, tokens)
    loss.backward()
    if reduce is not None:
        reduce(model)
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def timed_steps(model, optimizer, batch: torch.Tensor, steps: int) -> list[float]:
    """Seconds of each of `steps` full training steps (forward, backward, step, zero_grad)."""
    out = []
    for _ in range(steps):
        if batch.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        train_step(model, optimizer, batch)
        if batch.is_cuda:
            torch.cuda.synchronize()
        out.append(time.perf_counter() - start)
    return out
