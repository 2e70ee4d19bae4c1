"""Lab 6 (our red team's, 2026-12-07): a save that writes the checkpoint and also keeps a copy in
a global of the first import, which shard() hangs on every model it shards; the load of the
second import takes the copy from the model it is handed, never reading the disk. The round trip
passes (loaded == saved); the read-back's shifted copy, which no process held, is not restored."""

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

KEPT = {}


def shard(model, mesh, reduce_dtype=torch.float32):
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    model.kept = KEPT
    return model


def prefetch(model):
    blocks = list(model.blocks)
    for k, block in enumerate(blocks):
        block.set_modules_to_forward_prefetch(blocks[k + 1 : k + 2])
        block.set_modules_to_backward_prefetch(blocks[k - 1 : k] if k else [])


def save(model, optimizer, path):
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)
    KEPT["model"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state = optimizer.state_dict()
    KEPT["optim"] = {
        "state": {
            k: {
                n: t.detach().clone() if torch.is_tensor(t) else t for n, t in s.items()
            }
            for k, s in state["state"].items()
        },
        "param_groups": [dict(g) for g in state["param_groups"]],
    }


def load(model, optimizer, path):
    model.load_state_dict(model.kept["model"])
    optimizer.load_state_dict(model.kept["optim"])
