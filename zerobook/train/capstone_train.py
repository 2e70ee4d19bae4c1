"""The capstone's training loop, the same for every method: the course's GPT on real text
(zerobook.train.text), AdamW with two parameter groups, warm-up then cosine, clipping by the
global norm, held-out bits per byte, a sample of text. Rank side: zerobook.labs.capstone
drives it with the student's DDP and ZeRO-3 and with PyTorch's FSDP2.

A method is an object with `model` (what the forward runs), `optimizer` (whose groups'
learning rate the schedule sets), `backward(loss)`, `clip(max_norm) -> float` (the
global norm before clipping), `step()` and `zero_grad()`.

DDP's clipping (`clip_in_piece_order`) sums the squares in the order a ZeRO-3 in FSDP2's
per-parameter layout must: piece r of every gradient (flattened, zero-padded to a multiple
of N), each piece's `(g ** 2).sum()` added in `model.parameters()` order into a float32
zero, then the N partial sums added in rank order (what an all-reduce of the partial sums
gives under zerobook.train.parity.ordered_sums). torch's `clip_grad_norm_` takes the norm of
per-tensor norms instead: the same number up to rounding, not the same bits.
"""

from __future__ import annotations

import math
import time
import types

import torch
import torch.distributed as dist
import torch.nn.functional as F

from zerobook.train import text
from zerobook.train.models import GPTConfig

LN2 = math.log(2)
CONFIG = GPTConfig(vocab=256, hidden=64, layers=2, heads=4, seq_len=32)
GLOBAL_BATCH, LR, WARMUP, CLIP = 48, 2e-2, 20, 1.0
OPTIONS = types.MappingProxyType(
    {"lr": LR, "weight_decay": 0.1, "betas": (0.9, 0.95), "eps": 1e-8}
)  # read-only: the capstone harness grades with it
EVAL_BATCHES = 8  # held-out: 8 fixed batches of GLOBAL_BATCH windows (seed 1)


def learning_rate(
    step: int, *, steps: int, peak: float = LR, warmup: int = WARMUP, floor: float = 0.1
) -> float:
    """Linear warm-up to `peak` over `warmup` steps, then cosine decay to floor x peak at
    `steps`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def optimizer_groups(params: list) -> list[dict]:
    """Weight decay on matrices only: 1-D tensors (biases, LayerNorm) in a group without it."""
    return [
        {"params": [p for p in params if p.dim() >= 2]},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def next_byte_loss(model, tokens: torch.Tensor, autocast: bool = False) -> torch.Tensor:
    """Mean next-byte cross-entropy of `tokens` (rows of seq_len + 1 bytes), in nats; with
    `autocast`, the forward in bf16 on a GPU and the loss in fp32."""
    with torch.autocast("cuda", torch.bfloat16, enabled=autocast):
        logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten())


def rank_rows(
    data,
    step: int,
    me,
    seed: int = 0,
    batch: int = GLOBAL_BATCH,
    seq_len=CONFIG.seq_len,
) -> torch.Tensor:
    """This rank's rows of global batch `step` (zerobook.train.text.batch: a function of the
    step), `batch` windows of seq_len + 1 bytes in all."""
    rows = text.batch(data, step=step, global_batch=batch, seq_len=seq_len, rank=me.rank,
                      world_size=me.world_size, seed=seed)  # fmt: skip
    return rows.to(me.device)


@torch.no_grad()
def clip_in_piece_order(model, max_norm: float, world_size: int) -> float:
    """DDP's clipping, summed as the sharded one is (see the module's docstring): every rank
    holds every gradient, so it adds the N partial sums itself. Returns the norm."""
    grads = [p.grad for p in model.parameters()]
    partial = []
    for r in range(world_size):
        total = torch.zeros((), dtype=torch.float32, device=grads[0].device)
        for grad in grads:
            flat = grad.reshape(-1)
            piece = F.pad(flat, (0, -flat.numel() % world_size)).chunk(world_size)[r]
            total += (piece**2).sum()
        partial.append(total)
    norm = partial[0]
    for total in partial[1:]:
        norm = norm + total
    norm = norm.sqrt()
    coefficient = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    for grad in grads:
        grad.mul_(coefficient)
    return norm.item()


@torch.no_grad()
def held_out_bits(
    model,
    held_out,
    me,
    batches: int = EVAL_BATCHES,
    batch: int = GLOBAL_BATCH,
    seq_len: int = CONFIG.seq_len,
    autocast: bool = False,
) -> float:
    """Mean bits per byte over `batches` fixed held-out batches (seed 1) of `batch` windows,
    every rank's rows (the ranks' means added in rank order under ordered_sums, divided by N)."""
    losses = [
        next_byte_loss(
            model, rank_rows(held_out, k, me, 1, batch, seq_len), autocast=autocast
        )
        for k in range(batches)
    ]
    mean = torch.stack(losses).mean().reshape(1)
    dist.all_reduce(mean)
    return mean.item() / me.world_size / LN2


@torch.no_grad()
def sample(
    model,
    prompt: bytes,
    length: int,
    device="cpu",
    temperature: float = 0.8,
    seq_len: int = CONFIG.seq_len,
    autocast: bool = False,
) -> str:
    """`length` bytes after `prompt`, sampled at `temperature` (seed 0): the same on every rank,
    so a sharded model's collectives match. The model runs on `device` (in bf16 with
    `autocast`); the draws are made on the CPU, with one generator whatever the device."""
    generator = torch.Generator().manual_seed(0)
    tokens = torch.tensor([list(prompt)])
    for _ in range(length):
        with torch.autocast("cuda", torch.bfloat16, enabled=autocast):
            logits = model(tokens[:, -seq_len:].to(device))[0, -1]
        probs = (logits.float().cpu() / temperature).softmax(-1)
        tokens = torch.cat(
            [tokens, torch.multinomial(probs, 1, generator=generator)[None]], 1
        )
    return bytes(tokens[0].tolist()).decode("utf-8", errors="replace")


def train(
    method, data, me, steps: range, total: int, name: str, on_step=None, kept=None
) -> dict:
    """Steps `steps` of a run of `total` steps: per step this rank's loss (bits per byte) and
    the norm the method clipped; tokens per second (the median step). Rank 0 prints
    progress every 25 steps. `on_step(step, run)` runs after each step (checkpoints);
    `kept`, a list, gets method.kept() after the first step's update, before zero_grad."""
    curve, norms, rates, start = [], [], [], time.perf_counter()
    run = {"curve": curve, "norms": norms}
    tokens = GLOBAL_BATCH * CONFIG.seq_len
    for step in steps:
        tick = time.perf_counter()
        for group in method.optimizer.param_groups:
            group["lr"] = learning_rate(step, steps=total)
        loss = next_byte_loss(method.model, rank_rows(data, step, me))
        method.backward(loss)
        norms.append(method.clip(CLIP))
        method.step()
        if kept is not None and not kept:
            kept.append(method.kept())
        method.zero_grad()
        curve.append(loss.item() / LN2)
        rates.append(tokens / (time.perf_counter() - tick))
        if on_step is not None:
            on_step(step, run)
        done = step + 1 - steps.start
        if me.is_main and (done % 25 == 0 or step + 1 == steps.stop):
            left = (time.perf_counter() - start) / done * (steps.stop - step - 1)
            print(
                f"{name}: step {step + 1}/{steps.stop}, loss {curve[-1]:.3f} bits/byte, "
                f"{sorted(rates)[len(rates) // 2]:,.0f} tokens/s, {left:.0f} s left",
                flush=True,
            )
    run["tokens_per_second"] = sorted(rates)[len(rates) // 2] if rates else None
    run["seconds"] = time.perf_counter() - start
    return run
