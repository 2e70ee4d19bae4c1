"""A checkpoint of our own ZeRO-3: every rank saves its shard, a fresh run loads it and goes on.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.zero3_checkpoint --dir /tmp/z3ckpt

Trains `--steps` steps of the course's GPT under Zero3AdamW; after `--save-at` steps every rank
writes `Zero3.shard_state_dict()` (its fp32 master shard and AdamW's state of it) to
DIR/rank<r>.pt with torch.save — no collective, one file per rank — and trains on. Then a fresh
model and optimizer, built from another seed, load their rank's file and train the same remaining
steps. Reported by every rank: the losses after the save of both runs, SHA-256 digests of the full
weights at the end of both (gathered), and the size of its file.
"""

import argparse
from pathlib import Path

import torch

import zerobook as zb
from zerobook.fsdp2 import full_weights
from zerobook.train.models import GPT, Block, GPTConfig
from zerobook.train.sharded_checkpoint import sha256
from zerobook.train.training import rank_batch, train_step
from zerobook.zero import Zero3AdamW

CONFIG = GPTConfig(vocab=128, hidden=64, layers=3, heads=4, seq_len=32)
LR, BATCH = 1e-3, 4


def build(me: zb.Rank, seed: int):
    torch.manual_seed(seed)
    model = GPT(CONFIG).to(me.device)
    return model, Zero3AdamW(model, unit_types=(Block,), lr=LR)


def train(model, zero, steps, me: zb.Rank) -> list[float]:
    return [
        train_step(model, zero, rank_batch(CONFIG, BATCH, step, me)) for step in steps
    ]


def digest(model, zero) -> str:
    """SHA-256 of every weight, whole (an all-gather of every unit)."""
    return sha256([full_weights(model, zero)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--save-at", type=int, default=3)
    cli = parser.parse_args()
    me = zb.setup()
    model, zero = build(me, seed=0)
    train(model, zero, range(cli.save_at), me)
    path = Path(cli.dir) / f"rank{me.rank}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(zero.shard_state_dict(), path)
    continued = train(model, zero, range(cli.save_at, cli.steps), me)
    fresh, fresh_zero = build(
        me, seed=1
    )  # other weights, to be overwritten by the load
    fresh_zero.load_shard_state_dict(torch.load(path))
    resumed = train(fresh, fresh_zero, range(cli.save_at, cli.steps), me)
    zb.report(
        continued=continued,
        resumed=resumed,
        digest_continued=digest(model, zero),
        digest_resumed=digest(fresh, fresh_zero),
        file_bytes=path.stat().st_size,
        master_numel=zero.master.numel(),
        world_size=me.world_size,
    )


if __name__ == "__main__":
    main()
