"""Lab 6 (the second red team's): a checkpoint kept in a module global, never written."""

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model, mesh, reduce_dtype=torch.float32):
    """fully_shard each block of model.blocks, then the model itself, with bf16
    compute and the gradients reduce-scattered in `reduce_dtype`
    (MixedPrecisionPolicy); return the model."""
    ### BEGIN SOLUTION
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model
    ### END SOLUTION


def prefetch(model):
    """Block k prefetches block k+1 in forward and block k-1 in backward."""
    ### BEGIN SOLUTION
    blocks = list(model.blocks)
    for k, block in enumerate(blocks):
        block.set_modules_to_forward_prefetch(blocks[k + 1 : k + 2])
        block.set_modules_to_backward_prefetch(blocks[k - 1 : k] if k else [])
    ### END SOLUTION


_KEPT = {}


def save(model, optimizer, path):
    """Every rank writes its shards of the weights and of the optimizer state to
    `path`."""
    _KEPT["model"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state = optimizer.state_dict()
    _KEPT["optim"] = {
        "state": {
            k: {
                n: t.detach().clone() if torch.is_tensor(t) else t for n, t in s.items()
            }
            for k, s in state["state"].items()
        },
        "param_groups": [dict(g) for g in state["param_groups"]],
    }


def load(model, optimizer, path):
    """Read the checkpoint at `path` into this model's and optimizer's shards."""
    model.load_state_dict(_KEPT["model"])
    optimizer.load_state_dict(_KEPT["optim"])
