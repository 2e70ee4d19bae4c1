"""Sharded checkpoints with torch.distributed.checkpoint (DCP), a killed rank, and resuming.

    python -m torch.distributed.run --standalone --nproc-per-node 2 --max-restarts 1 \
        -m zerobook.runs.dcp_resume --dir /tmp/ckpt --steps 10 --every 3 --kill-rank 1 --kill-step 7

A GPT under FSDP2 (`fully_shard` on every block and the root), AdamW, trains `--steps` steps on a
fixed global batch per step (seeded by the step, split across the ranks). Every `--every` steps
each rank writes its own shards — weights and optimizer state as DTensors — into
DIR/step_<k> with `dcp.save`; the directory is complete once its `.metadata` file exists. At
start, a rank loads the newest complete checkpoint, if any (`dcp.load` reshards: the checkpoint
may come from another number of ranks), and goes on from there.

`--kill-rank R --kill-step S`: on the first attempt only (torchrun's TORCHELASTIC_RESTART_COUNT
is 0), rank R kills itself with SIGKILL just before step S — no traceback, no goodbye. Its peers
fail in their next collective; torchrun (`--max-restarts`) restarts every rank, and they resume
from the last checkpoint. Reported by each rank: the step it started from, the loss of every step
it ran, the restart count, and SHA-256 digests of the full weights and of AdamW's moments at the
end (with `--steps` equal to the checkpoint's step: the state just loaded).
"""

import argparse
import os
import signal
from pathlib import Path

import torch

import zerobook as zb
from zerobook.fsdp2 import shard_blocks
from zerobook.train.models import GPT, GPTConfig
from zerobook.train.sharded_checkpoint import latest, load, save, state_digests
from zerobook.train.training import rank_batch, train_step

CONFIG = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)
GLOBAL_BATCH, LR = 8, 1e-3


def build(me: zb.Rank):
    """The FSDP2 model and its AdamW, from seed 0."""
    torch.manual_seed(0)
    model = GPT(CONFIG).to(me.device)
    shard_blocks(model, me)
    return model, torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--every", type=int, default=3)
    parser.add_argument("--kill-rank", type=int)
    parser.add_argument("--kill-step", type=int)
    cli = parser.parse_args()
    me = zb.setup()
    directory, restarts = (
        Path(cli.dir),
        int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
    )
    model, optimizer = build(me)
    found = latest(directory)
    start = load(model, optimizer, found) if found else 0
    per_rank = GLOBAL_BATCH // me.world_size
    losses = {}
    for step in range(start, cli.steps):
        if step == cli.kill_step and me.rank == cli.kill_rank and restarts == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        losses[step] = train_step(
            model, optimizer, rank_batch(CONFIG, per_rank, step, me)
        )
        if (step + 1) % cli.every == 0:
            save(model, optimizer, step + 1, directory)
    zb.report(
        start=start,
        losses=losses,
        restarts=restarts,
        digests=state_digests(model, optimizer),
        world_size=me.world_size,
    )


if __name__ == "__main__":
    main()
