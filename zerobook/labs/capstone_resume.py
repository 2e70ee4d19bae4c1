"""Killed and resumed: the capstone's ZeRO-3 run with sharded checkpoints that a kill cannot
spoil (rank side, zerobook.labs.capstone's `resume` part).

A checkpoint of step s is written into `step-s.partial/`: every rank its own shard (the
student's `save_shard`: master pieces and optimizer state) and its RNG state; once every
rank has written (a barrier), rank 0 renames the folder to `step-s/` — one rename, atomic
on a POSIX file system, is the commit. A rank killed while writing leaves a `.partial`
folder that no one reads: the last committed checkpoint stays whole. Nothing else needs
saving: the sampler and the learning-rate schedule are functions of the step.

The launch runs with torchrun's --max-restarts 1: after the kill torchrun stops the other
ranks and starts all of them again (TORCHELASTIC_RESTART_COUNT = 1), in the same job, on
the same machines. A cluster whose node died would instead requeue the job on other
nodes; both resume from the same files.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

from zerobook.train.capstone_train import train
from zerobook.labs.harness import call_student

KILLED_RANK = 1


def folder_of_this_launch() -> Path:
    """One folder per launch, the same for its restarted ranks (torchrun's run id)."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    return Path(tempfile.gettempdir()) / f"capstone-{run_id}"


def committed(folder: Path) -> list[int]:
    """The steps of the committed checkpoints (`step-s/`, never `.partial`), in order."""
    if not folder.is_dir():
        return []
    return sorted(
        int(d.name[5:]) for d in folder.glob("step-*") if d.name[5:].isdigit()
    )


def checkpoint(student, zero, folder: Path, step: int, me, kill: bool) -> None:
    """Write step `step`'s checkpoint, then commit it (see the module's docstring). With
    `kill`, rank KILLED_RANK dies by SIGKILL after writing its shard, before the commit."""
    partial = folder / f"step-{step:05d}.partial"
    if me.is_main:
        partial.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    call_student(student, "save_shard", zero, str(partial / f"rank{me.rank}.pt"))
    torch.save({"rng": torch.get_rng_state()}, partial / f"rank{me.rank}.rng.pt")
    if kill and me.rank == KILLED_RANK:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        dist.barrier()  # every shard is written: commit
    except RuntimeError:
        if not kill:
            raise
        print(  # the planned kill: the others stop here, without a traceback
            f"rank {me.rank}: rank {KILLED_RANK} was killed writing step {step}'s "
            "checkpoint (as planned); torchrun restarts every rank",
            flush=True,
        )
        os._exit(1)
    if me.is_main:
        os.rename(partial, folder / f"step-{step:05d}")
    dist.barrier()


def load_last(student, zero, folder: Path, me) -> int:
    """Load the last committed checkpoint into the student's ZeRO-3; its step (0: none)."""
    steps = committed(folder)
    if not steps:
        return 0
    last = folder / f"step-{steps[-1]:05d}"
    call_student(student, "load_shard", zero, str(last / f"rank{me.rank}.pt"))
    torch.set_rng_state(torch.load(last / f"rank{me.rank}.rng.pt")["rng"])
    return steps[-1]


def resume(
    make_method, student, data, me, total: int, until: int, every: int, kill_at: int
) -> dict:
    """The first attempt trains from step 0, checkpointing every `every` steps, and is
    killed writing step `kill_at`'s; the second loads the last committed one and trains to
    `until`."""
    folder, attempt = (
        folder_of_this_launch(),
        int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
    )
    method = make_method()
    start = load_last(student, method.zero, folder, me) if attempt else 0
    left = sorted(d.name for d in folder.glob("*.partial")) if folder.is_dir() else []

    lost = folder / f"first-attempt-rank{me.rank}.json"

    def on_step(step: int, run: dict) -> None:
        if (step + 1) % every == 0 and step + 1 < until:
            kill = attempt == 0 and step + 1 == kill_at
            if kill:  # the first attempt's curve, for the page (the kill loses it)
                lost.write_text(json.dumps(run["curve"]))
            checkpoint(student, method.zero, folder, step + 1, me, kill)

    name = f"your ZeRO-3, attempt {attempt + 1}"
    run = train(method, data, me, range(start, until), total, name, on_step)
    first = json.loads(lost.read_text()) if lost.is_file() else None
    dist.barrier()
    if me.is_main:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "attempt": attempt,
        "first_attempt": first,
        "resumed_from": start,
        "partial_left": left,
        "curve": run["curve"],
        "norms": run["norms"],
        "every": every,
        "kill_at": kill_at,
        "killed_rank": KILLED_RANK,
    }
