"""Sharded checkpoints with torch.distributed.checkpoint (DCP), a killed rank, and resuming.

    python -m torch.distributed.run --standalone --nproc-per-node 2 --max-restarts 1 \
        -m zerobook.labs.dcp_resume --dir /tmp/ckpt --steps 10 --every 3 --kill-rank 1 --kill-step 7

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
import hashlib
import os
import signal
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import zerobook as zb
from zerobook.models import GPT, GPTConfig, next_token_loss, random_batch

CONFIG = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)
GLOBAL_BATCH, LR = 8, 1e-3


def build(me: zb.Rank):
    """The FSDP2 model and its AdamW, from seed 0."""
    torch.manual_seed(0)
    model = GPT(CONFIG).to(me.device)
    mesh = init_device_mesh(me.device.split(":")[0], (me.world_size,))
    for module in [*model.blocks, model]:
        fully_shard(module, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)


def latest(directory: Path) -> Path | None:
    """The newest complete checkpoint (its .metadata written last by dcp.save), or None."""
    done = [p for p in directory.glob("step_*") if (p / ".metadata").exists()]
    return max(done, key=lambda p: int(p.name.split("_")[1]), default=None)


def save(model, optimizer, step: int, directory: Path) -> None:
    """Every rank writes its shards of weights and optimizer state (dcp.save, collective)."""
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(directory / f"step_{step}"))


def load(model, optimizer, path: Path) -> int:
    """Load a checkpoint into this run's shards (resharding as needed); returns its step."""
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return int(path.name.split("_")[1])


def sha256(tensors) -> str:
    """A digest of full tensors (DTensors gathered), bit for bit."""
    digest = hashlib.sha256()
    for t in tensors:
        t = t.full_tensor() if hasattr(t, "full_tensor") else t
        digest.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def state_digests(model, optimizer) -> dict:
    """Digests of the full weights and of AdamW's full momentum and variance (collective)."""
    params = list(model.parameters())
    moments = [optimizer.state[p][k] for p in params for k in ("exp_avg", "exp_avg_sq") if p in optimizer.state]
    return {"weights": sha256(params), "moments": sha256(moments), "moment_tensors": len(moments)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--every", type=int, default=3)
    parser.add_argument("--kill-rank", type=int)
    parser.add_argument("--kill-step", type=int)
    cli = parser.parse_args()
    me = zb.setup()
    directory, restarts = Path(cli.dir), int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    model, optimizer = build(me)
    found = latest(directory)
    start = load(model, optimizer, found) if found else 0
    per_rank = GLOBAL_BATCH // me.world_size
    losses = {}
    for step in range(start, cli.steps):
        if step == cli.kill_step and me.rank == cli.kill_rank and restarts == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        tokens = random_batch(CONFIG, GLOBAL_BATCH, seed=step)[me.rank * per_rank:(me.rank + 1) * per_rank]
        loss = next_token_loss(model, tokens.to(me.device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses[step] = loss.item()
        if (step + 1) % cli.every == 0:
            save(model, optimizer, step + 1, directory)
    zb.report(start=start, losses=losses, restarts=restarts, digests=state_digests(model, optimizer),
              world_size=me.world_size)


if __name__ == "__main__":
    main()
