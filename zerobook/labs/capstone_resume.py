"""Killed and resumed: the capstone's ZeRO-3 run with sharded checkpoints that a kill cannot
spoil (rank side, zerobook.labs.capstone's `resume` part).

A checkpoint of step s is written into `step-s.partial/`: every rank its own shard (the
student's `save_shard`: master pieces and optimizer state) and its RNG state, with the
harness's own copy of what the shard must hold (the pieces its optimizer updates, and their
AdamW state); once every
rank has written (a barrier), rank 0 renames the folder to `step-s/` — one rename, atomic
on a POSIX file system, is the commit. A rank killed while writing leaves a `.partial`
folder that no one reads: the last committed checkpoint stays whole. Nothing else needs
saving: the sampler and the learning-rate schedule are functions of the step.

The launch runs with torchrun's --max-restarts 1: after the kill torchrun stops the other
ranks and starts all of them again (TORCHELASTIC_RESTART_COUNT = 1), in the same job, on
the same machines. A cluster whose node died would instead requeue the job on other
nodes; both resume from the same files.

After the student's `load_shard` the harness compares its optimizer's pieces and their state
with its copy, and says which of the two was not restored, for which parameter (each piece
named by the parameter whose piece r it was when the student's Zero3 was built).
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
from zerobook.labs.zero3_record import pieces, same

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


def masters_of(optimizer) -> list:
    """The tensors `optimizer` updates (the student's master pieces), in its groups' order."""
    return [p for group in optimizer.param_groups for p in group["params"]]


def state_of(optimizer) -> dict:
    """What a shard must restore: each piece the optimizer updates, and its state (AdamW's
    step, exp_avg, exp_avg_sq), copied."""
    masters = masters_of(optimizer)
    state = [
        {k: torch.as_tensor(v).clone() for k, v in optimizer.state.get(m, {}).items()}
        for m in masters
    ]
    return {"masters": [m.detach().clone() for m in masters], "state": state}


def checkpoint(student, method, folder: Path, step: int, me, kill: bool) -> None:
    """Write step `step`'s checkpoint, then commit it (see the module's docstring). With
    `kill`, rank KILLED_RANK dies by SIGKILL after writing its shard, before the commit."""
    partial = folder / f"step-{step:05d}.partial"
    if me.is_main:
        partial.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    call_student(student, "save_shard", method.zero, str(partial / f"rank{me.rank}.pt"))
    torch.save({"rng": torch.get_rng_state(), "held": state_of(method.optimizer)},
               partial / f"rank{me.rank}.rng.pt")  # fmt: skip
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


def load_last(student, method, folder: Path, me, names: dict) -> tuple[int, dict]:
    """Load the last committed checkpoint into the student's ZeRO-3; its step (0: none) and
    what load_shard did not restore (`restored`)."""
    steps = committed(folder)
    if not steps:
        return 0, {}
    last = folder / f"step-{steps[-1]:05d}"
    call_student(student, "load_shard", method.zero, str(last / f"rank{me.rank}.pt"))
    saved = torch.load(last / f"rank{me.rank}.rng.pt")
    torch.set_rng_state(saved["rng"])
    return steps[-1], restored(method.optimizer, saved["held"], names)


def piece_names(initial: dict, optimizer, me) -> dict:
    """Each piece the optimizer updates (its index) -> the parameter whose piece r it is in
    `initial` (the weights before the student's Zero3 was built); pieces of equal values go
    to the parameters in model order."""
    masters, names = masters_of(optimizer), {}
    for name, weight in initial.items():
        piece = pieces(weight, me.world_size)[me.rank]
        index = next(
            (i for i, m in enumerate(masters) if i not in names and same(m, piece)),
            None,
        )
        if index is not None:
            names[index] = name
    return names


def restored(optimizer, held: dict, names: dict) -> dict:
    """What load_shard left unlike the checkpoint's copy: the parameters whose master piece
    differs, those whose AdamW state does (and which of its tensors), out of how many."""
    now = state_of(optimizer)
    masters, state, keys = [], [], set()
    for i, (piece, was) in enumerate(zip(now["masters"], held["masters"])):
        name = names.get(i, f"the piece at index {i} of your optimizer's groups")
        if not same(piece, was):
            masters.append(name)
        differ = {
            k
            for k, v in held["state"][i].items()
            if k not in now["state"][i] or not torch.equal(now["state"][i][k], v)
        }
        if differ:
            state.append(name)
            keys |= differ
    return {"masters": masters, "state": state, "state_keys": sorted(keys),
            "pieces": len(held["masters"])}  # fmt: skip


def weights_before(make_method) -> dict:
    """The full weights, by name, of the model `make_method` (a functools.partial whose
    arguments hold it) gives the student's Zero3, copied before that Zero3 frees them."""
    model = next(a for a in make_method.args if isinstance(a, torch.nn.Module))
    return {name: p.detach().clone() for name, p in model.named_parameters()}


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
    initial = weights_before(make_method)
    method = make_method()
    names = piece_names(initial, method.optimizer, me)
    start, missing = (
        load_last(student, method, folder, me, names) if attempt else (0, {})
    )
    left = sorted(d.name for d in folder.glob("*.partial")) if folder.is_dir() else []

    lost = folder / f"first-attempt-rank{me.rank}.json"

    def on_step(step: int, run: dict) -> None:
        if (step + 1) % every == 0 and step + 1 < until:
            kill = attempt == 0 and step + 1 == kill_at
            if kill:  # the first attempt's curve, for the page (the kill loses it)
                lost.write_text(json.dumps(run["curve"]))
            checkpoint(student, method, folder, step + 1, me, kill)

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
        "not_restored": missing,
        "partial_left": left,
        "curve": run["curve"],
        "norms": run["norms"],
        "every": every,
        "kill_at": kill_at,
        "killed_rank": KILLED_RANK,
    }
