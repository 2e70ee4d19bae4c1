"""Sharded checkpoints with torch.distributed.checkpoint (DCP) for FSDP2 models: every rank writes
and reads its own shards; a checkpoint can be loaded on another number of ranks.

    save(model, optimizer, step, directory)      # directory/step_<step>/ (collective)
    step = load(model, optimizer, latest(directory))
    state_digests(model, optimizer)              # SHA-256 of full weights and moments
    tensor_digests(model, optimizer)             # ... of each, by name
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


def latest(directory: Path) -> Path | None:
    """The newest complete checkpoint (its .metadata written last by dcp.save), or None."""
    done = [p for p in Path(directory).glob("step_*") if (p / ".metadata").exists()]
    return max(done, key=lambda p: int(p.name.split("_")[1]), default=None)


def save(model, optimizer, step: int, directory: Path) -> None:
    """Every rank writes its shards of weights and optimizer state (dcp.save, collective)."""
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save(
        {"model": model_state, "optim": optim_state},
        checkpoint_id=str(Path(directory) / f"step_{step}"),
    )


def load(model, optimizer, path: Path) -> int:
    """Load a checkpoint into this run's shards (resharding as needed); returns its step."""
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optim"],
    )
    return int(Path(path).name.split("_")[1])


def sha256(tensors) -> str:
    """A digest of full tensors (DTensors gathered: collective), bit for bit."""
    digest = hashlib.sha256()
    for t in tensors:
        t = t.full_tensor() if hasattr(t, "full_tensor") else t
        flat = t.detach().cpu().reshape(-1).contiguous()  # a 0-d tensor too
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def state_digests(model, optimizer) -> dict:
    """Digests of the full weights and of AdamW's full momentum and variance (collective), and
    AdamW's step counts (its bias correction reads them)."""
    params = list(model.parameters())
    moments = [
        optimizer.state[p][k]
        for p in params
        for k in ("exp_avg", "exp_avg_sq")
        if p in optimizer.state
    ]
    steps = [optimizer.state[p].get("step") for p in params if p in optimizer.state]
    return {
        "weights": sha256(params),
        "moments": sha256(moments),
        "moment_tensors": len(moments),
        "steps": sorted({float(getattr(s, "full_tensor", lambda: s)()) for s in steps}),
    }


def tensor_digests(model, optimizer) -> dict:
    """The digest of each full weight and AdamW moment (`name`, `name exp_avg`, `name
    exp_avg_sq`), DTensors gathered (collective)."""
    digests = {}
    for name, p in model.named_parameters():
        digests[name] = sha256([p])
        for k in ("exp_avg", "exp_avg_sq"):
            if p in optimizer.state:
                digests[f"{name} {k}"] = sha256([optimizer.state[p][k]])
    return digests
