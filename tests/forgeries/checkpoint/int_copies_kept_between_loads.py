"""Attack D: an honest DCP save plus int32 views of every weight and moment (same bytes: same
digest, and the reader shifts floating-point tensors only) under later keys, so the harness
matches each tensor to its never-shifted copy; load of the checkpoint is honest, load of the
shifted copy reads nothing (state the same module kept from the first load)."""

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

kept = {}


def shard(model, mesh, reduce_dtype=torch.float32):
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def prefetch(model):
    blocks = list(model.blocks)
    for k, block in enumerate(blocks):
        block.set_modules_to_forward_prefetch(blocks[k + 1 : k + 2])
        block.set_modules_to_backward_prefetch(blocks[k - 1 : k] if k else [])


def copied(x):
    if isinstance(x, dict):
        return {k: copied(v) for k, v in x.items()}
    if isinstance(x, list):
        return [copied(v) for v in x]
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    return x


def save(model, optimizer, path):
    model_state, optim_state = get_state_dict(model, optimizer)
    same = {}
    for name, p in model.named_parameters():
        same[name] = p.full_tensor().view(torch.int32)
        for k in ("exp_avg", "exp_avg_sq"):
            same[name + " " + k] = optimizer.state[p][k].full_tensor().view(torch.int32)
    dcp.save(
        {"model": model_state, "optim": optim_state, "zz": same}, checkpoint_id=path
    )


def load(model, optimizer, path):
    if "state" not in kept:
        model_state, optim_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optim": optim_state}
        dcp.load(state, checkpoint_id=path)
        kept["state"] = (copied(state["model"]), copied(state["optim"]))
    model_state, optim_state = kept["state"]
    set_state_dict(
        model,
        optimizer,
        model_state_dict=copied(model_state),
        optim_state_dict=copied(optim_state),
    )
