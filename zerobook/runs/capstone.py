"""Train the course's GPT on real text (the standard library's source, zerobook.train.text) and report
the loss curve, held-out bits per byte, tokens per second and a sample of generated text.

    python -m torch.distributed.run --standalone --nproc-per-node 3 -m zerobook.runs.capstone --method fsdp2
    python -m zerobook.runs.capstone --method single --hidden 768 --layers 12 --steps 3000   # one GPU

Methods: `single` (one process, no wrapper), `ddp` (torch's DistributedDataParallel), `fsdp2`
(fully_shard per block, then the root). AdamW with weight decay on matrices only (parameter
groups), a linear warm-up then a cosine decay of the learning rate, gradient clipping by the
global norm. On a GPU: bf16 autocast over fp32 weights, sdpa attention. Every `--log-every`
steps rank 0 prints step, loss, tokens/s and time left; held-out loss every `--eval-every`.
"""

import argparse
import math
import statistics
import time

import torch

import zerobook as zb
from zerobook.train import text
from zerobook.train.capstone_train import held_out_bits as capstone_held_out_bits
from zerobook.train.capstone_train import (
    learning_rate,
    next_byte_loss,
    optimizer_groups,
    rank_rows,
)
from zerobook.train.capstone_train import sample as capstone_sample
from zerobook.train.models import GPT, config_of
from zerobook.perfmodel.models import course_gpt

LN2 = math.log(2)


def wrap(model, method: str, me):
    if method == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model)
    if method == "fsdp2":
        from zerobook.fsdp2 import shard_blocks

        shard_blocks(model, me)
    return model


def optimizer_for(model, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with two groups: matrices decay, vectors (biases, LayerNorm) do not."""
    groups = optimizer_groups(list(model.parameters()))
    return torch.optim.AdamW(
        groups, lr=lr, weight_decay=weight_decay, betas=(0.9, 0.95), eps=1e-8
    )


def loss_of(model, tokens, device: str) -> torch.Tensor:
    """Mean next-byte cross-entropy (nats); bf16 autocast on a GPU."""
    return next_byte_loss(model, tokens, autocast=device.startswith("cuda"))


def rank_batch(data, step: int, cli, me, seed: int = 0) -> torch.Tensor:
    """This rank's rows of the global batch of `step` (zerobook.train.capstone_train.rank_rows)."""
    return rank_rows(data, step, me, seed, cli.batch * me.world_size, cli.seq_len)


def held_out_bits(model, data, cli, me, batches: int) -> float:
    """zerobook.train.capstone_train.held_out_bits at this run's batch and sequence length."""
    return capstone_held_out_bits(model, data, me, batches, cli.batch * me.world_size,
                                  cli.seq_len, autocast=me.device.startswith("cuda"))  # fmt: skip


def sample(model, prompt: bytes, length: int, seq_len: int, device: str) -> str:
    """zerobook.train.capstone_train.sample: the draws on the CPU, one generator whatever the device."""
    return capstone_sample(model, prompt, length, device, seq_len=seq_len,
                           autocast=device.startswith("cuda"))  # fmt: skip


def train(model, optimizer, train_data, held_out, cli, me) -> dict:
    curve, evals, rates, clipped = [], [], [], []
    tokens_per_step, start = (
        cli.batch * me.world_size * cli.seq_len,
        time.perf_counter(),
    )
    for step in range(cli.steps):
        tick = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(
                step, peak=cli.lr, warmup=cli.warmup, steps=cli.steps
            )
        tokens = rank_batch(train_data, step, cli, me)
        loss = loss_of(model, tokens, me.device)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cli.clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        curve.append(loss.item() / LN2)  # this rank's batch, bits per byte
        clipped.append(
            float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        )
        rates.append(tokens_per_step / (time.perf_counter() - tick))
        if (step + 1) % cli.eval_every == 0 or step + 1 == cli.steps:
            evals.append(
                (step + 1, held_out_bits(model, held_out, cli, me, cli.eval_batches))
            )
        if me.is_main and ((step + 1) % cli.log_every == 0 or step + 1 == cli.steps):
            elapsed = time.perf_counter() - start
            left = elapsed / (step + 1) * (cli.steps - step - 1)
            last = f", held-out {evals[-1][1]:.3f} bits/byte" if evals else ""
            print(
                f"step {step + 1}/{cli.steps}: loss {curve[-1]:.3f} bits/byte{last}, "
                f"{statistics.median(rates[-cli.log_every :]):,.0f} tokens/s, {left:.0f} s left",
                flush=True,
            )
    return {
        "curve": curve,
        "evals": evals,
        "grad_norms": clipped,
        "seconds": time.perf_counter() - start,
        "tokens_per_second": statistics.median(rates[len(rates) // 5 :]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--method", choices=["single", "ddp", "fsdp2"], default="single"
    )
    for name, default in (
        ("hidden", 64),
        ("layers", 2),
        ("heads", 4),
        ("seq-len", 64),
        ("batch", 8),
        ("steps", 50),
        ("warmup", 10),
        ("eval-every", 25),
        ("eval-batches", 4),
        ("log-every", 10),
        ("sample", 200),
    ):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--clip", type=float, default=1.0)
    cli = parser.parse_args()
    me = zb.setup()
    cuda = me.device.startswith("cuda")
    config = config_of(cli, attention="sdpa" if cuda else "manual")
    train_data, held_out = text.load()
    torch.manual_seed(0)
    model = wrap(GPT(config).to(me.device), cli.method, me)
    optimizer = optimizer_for(model, cli.lr, cli.weight_decay)
    result = train(model, optimizer, train_data, held_out, cli, me)
    generated = (
        sample(model, b"def ", cli.sample, cli.seq_len, me.device)
        if cli.method != "fsdp2"
        else None
    )
    spec = course_gpt(config)
    zb.report(
        method=cli.method,
        world_size=me.world_size,
        config=vars(cli),
        num_params=spec.num_params(),
        flops_per_token=spec.flops_per_token(cli.seq_len),
        train_bytes=len(train_data),
        held_out_bytes=len(held_out),
        baselines={
            n: text.ngram_bits_per_byte(train_data, held_out, n) for n in (1, 2)
        },
        device_name=torch.cuda.get_device_name(0) if cuda else "cpu",
        sample=generated,
        **result,
    )


if __name__ == "__main__":
    main()
