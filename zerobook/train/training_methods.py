"""The ways to train that zerobook.runs.zero_parity compares, one `Method` each: DDP (reducing
once a step, or after every micro-batch), our ZeRO stages 1, 2 and 3 (and their variants: stage 1
clipped by its shard's norm, stage 2 with no_sync, stage 3 resharding the root or offloaded), our
ShardedOptimizer and PyTorch's ZeroRedundancyOptimizer; the parameter groups they all take and how
each clips by the global norm.

    METHODS["zero2"].optimizer(model, groups_of(model))   # a Zero2AdamW over the two groups
"""

from dataclasses import dataclass
from typing import Callable

import torch

from zerobook.train.models import Block
from zerobook.train.precision import MixedPrecisionAdamW
from zerobook.zero import ShardedOptimizer, Zero1AdamW, Zero2AdamW, Zero3AdamW

LR = 1e-3
BUCKET_NUMEL = 2**13  # small, so that the parity run's small model has several buckets


@dataclass(frozen=True)
class Method:
    """One way to train: its optimizer (from the model and its parameter groups), who averages the
    gradients ("step": DDP's all-reduce after the micro-batches, "micro-batch": after each one,
    "optimizer": the ZeRO optimizer reduce-scatters them itself), and its options."""

    optimizer: Callable
    averages: str = "optimizer"
    reference: str = "ddp"  # the DDP that reduces when this method does
    no_sync: bool = (
        False  # stage 2's accumulation without reducing (all but the last micro-batch)
    )
    shard_norm: bool = False  # the mistake: clip by this rank's shard's norm
    local: Callable = staticmethod(
        lambda optimizer: optimizer
    )  # whose state a rank holds


def zero_redundancy(model, groups):
    """PyTorch's ZeroRedundancyOptimizer over AdamW (it takes one group, then the others)."""
    from torch.distributed.optim import (
        ZeroRedundancyOptimizer,
    )  # ~1 s of imports: only when asked

    optimizer = ZeroRedundancyOptimizer(
        groups[0]["params"], optimizer_class=torch.optim.AdamW, lr=LR, weight_decay=0.1
    )
    optimizer.add_param_group(groups[1])
    return optimizer


def zero3(**options) -> Callable:
    """Our ZeRO-3, one unit per transformer block and the root."""
    return lambda model, groups: Zero3AdamW(
        model, unit_types=(Block,), groups=groups, lr=LR, **options
    )


METHODS = {
    "ddp": Method(
        lambda model, groups: MixedPrecisionAdamW(groups, lr=LR), averages="step"
    ),
    "ddp_every": Method(
        lambda model, groups: MixedPrecisionAdamW(groups, lr=LR),
        averages="micro-batch",
        reference="ddp_every",
    ),
    "zero1": Method(lambda model, groups: Zero1AdamW(groups, lr=LR)),
    "zero1_shard_norm": Method(
        lambda model, groups: Zero1AdamW(groups, lr=LR), shard_norm=True
    ),
    "zero2": Method(
        lambda model, groups: Zero2AdamW(groups, lr=LR, bucket_numel=BUCKET_NUMEL),
        reference="ddp_every",
    ),
    "zero2_no_sync": Method(
        lambda model, groups: Zero2AdamW(groups, lr=LR, bucket_numel=BUCKET_NUMEL),
        no_sync=True,
    ),
    "zero3": Method(zero3(), reference="ddp_every"),
    "zero3_reshard_root": Method(zero3(reshard_root=True), reference="ddp_every"),
    "zero3_offload": Method(
        zero3(offload="cpu"), reference="ddp_every"
    ),  # master and AdamW in host memory
    "sharded": Method(
        lambda model, groups: ShardedOptimizer(groups, torch.optim.AdamW, lr=LR),
        averages="step",
    ),
    "zero_ro": Method(
        zero_redundancy, averages="step", local=lambda optimizer: optimizer.optim
    ),
}


def groups_of(model) -> list[dict]:
    """Weight decay for matrices only, and half the learning rate for the 1-D tensors."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() > 1], "weight_decay": 0.1},
        {
            "params": [p for p in params if p.dim() <= 1],
            "weight_decay": 0.0,
            "lr": LR / 2,
        },
    ]


def clip(method: Method, model, optimizer, max_norm: float) -> float:
    """Clip by global norm, each method its own way; return the norm before clipping. With
    max_norm = inf the scale is exactly 1 (the norm is still computed and returned)."""
    if method.shard_norm:  # the mistake: every rank clips by its own shard's norm
        grad = optimizer.reduced_grad()
        norm = grad.norm()
        grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm.item()
    if method.averages == "optimizer":
        return optimizer.clip_grad_norm_(max_norm).item()
    return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()
