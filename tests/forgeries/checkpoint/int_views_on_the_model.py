"""Attack A: the first import's shard() hands the saved state to the fresh model (an attribute);
save writes int32 views (same bytes, never shifted); load never reads the disk."""

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
    kept["state"] = (copied(model_state), copied(optim_state))
    out = {}
    for name, p in model.named_parameters():
        out[name] = p.full_tensor().view(torch.int32)
        for k in ("exp_avg", "exp_avg_sq"):
            out[name + " " + k] = optimizer.state[p][k].full_tensor().view(torch.int32)
    dcp.save(out, checkpoint_id=path)


def load(model, optimizer, path):
    model_state, optim_state = model.stash
    set_state_dict(
        model,
        optimizer,
        model_state_dict=copied(model_state),
        optim_state_dict=copied(optim_state),
    )
