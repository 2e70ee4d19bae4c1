"""Attack B: an honest DCP save; load never reads the checkpoint (the first import's shard()
hands the saved state to the fresh model), and of the shifted copy reads one tensor only:
the offset is one number for the whole copy, recovered from it and added to the kept state."""

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
    if kept:
        model.stash = kept["state"]
    return model


def prefetch(model):
    blocks = list(model.blocks)
    for k, block in enumerate(blocks):
        block.set_modules_to_forward_prefetch(blocks[k + 1 : k + 2])
        block.set_modules_to_backward_prefetch(blocks[k - 1 : k] if k else [])


def copied(x, offset=None):
    if isinstance(x, dict):
        return {k: copied(v, offset) for k, v in x.items()}
    if isinstance(x, list):
        return [copied(v, offset) for v in x]
    if isinstance(x, torch.Tensor):
        if offset is not None and x.is_floating_point() and x.dim():
            return x.detach() + offset
        return x.detach().clone()
    return x


def save(model, optimizer, path):
    model_state, optim_state = get_state_dict(model, optimizer)
    kept["state"] = (copied(model_state), copied(optim_state))
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)


def load(model, optimizer, path):
    model_state, optim_state = model.stash
    offset = None
    if path.endswith("shifted"):
        name = "tok.weight" if "tok.weight" in model_state else list(model_state)[0]
        one = model_state[name].full_tensor()
        probe = {"model": {name: torch.empty_like(one)}}
        dcp.load(probe, checkpoint_id=path)  # one tensor of the copy
        d = (probe["model"][name] - one).reshape(-1)[0].item()
        offset = round(d * 65536) / 65536
    set_state_dict(
        model,
        optimizer,
        model_state_dict=copied(model_state, offset),
        optim_state_dict=copied(optim_state, offset),
    )
