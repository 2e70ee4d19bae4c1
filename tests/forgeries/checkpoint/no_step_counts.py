"""Lab 6 (our second red team's, 2026-12-07): a checkpoint of the weights and AdamW moments
alone, without AdamW's step counts: the resumed loss (taken before the update) matched. Now
the state digests hold the step counts too."""

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


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


def tensors(model, optimizer):
    state = {}
    for name, p in model.named_parameters():
        state[name] = p
        state[name + " m"] = optimizer.state[p]["exp_avg"]
        state[name + " v"] = optimizer.state[p]["exp_avg_sq"]
    return state


def save(model, optimizer, path):
    dcp.save(tensors(model, optimizer), checkpoint_id=path)  # no step, no param_groups


def load(model, optimizer, path):
    dcp.load(
        tensors(model, optimizer), checkpoint_id=path
    )  # step stays the fresh run's
