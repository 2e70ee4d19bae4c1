"""Lab 6 (our second red team's, 2026-12-07): save rewrites every weight and moment to
±2^26 (signs that keep the logits at 0) and saves those; load refills the constants. Adding
an offset in [1, 2) rounds back to 2^26, so the shifted copy was the saved one, bit for bit.
Now the digests are taken before the save (loaded differs from what training left) and the
shifted copy holds fresh random values."""

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

BIG = 67108864.0  # 2**26: a float32 ulp of 4 below it and 8 above, so + an offset in [1, 2) rounds back, either sign


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


def flatten(model, optimizer):
    """Every weight and moment a power of two whose float32 ulp is 4 (an offset in [1, 2)
    rounds away), signs chosen so that the forward stays finite (the loss is log(vocab))."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            local = p.to_local()
            local.fill_(BIG)
            if name.endswith("bias") and ("ln" in name or "qkv" in name):
                local[..., 1::2] = -BIG
            if name.endswith("mlp.0.bias"):
                local.fill_(-BIG)
            st = optimizer.state[p]
            st["exp_avg"].to_local().fill_(BIG)
            st["exp_avg_sq"].to_local().fill_(BIG)


def save(model, optimizer, path):
    flatten(model, optimizer)  # the training state is gone; what is left is a constant
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)


def load(model, optimizer, path):
    flatten(model, optimizer)  # never reads path
