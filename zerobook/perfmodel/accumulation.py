"""Gradient accumulation: with k micro-batches per optimizer step, which micro-batches' backward
reduces the gradients, as each stage's software ships it (the step model's and traffic's rule)."""

from __future__ import annotations

# With several micro-batches, when each stage reduces its gradients as the software ships it:
# DDP under no_sync, as training loops use it, and DeepSpeed's ZeRO-1 once, at the accumulation
# boundary; DeepSpeed's ZeRO-2 after every micro-batch (deepspeed/runtime/zero/stage_1_and_2.py,
# reduce_ready_partitions_and_remove_grads); FSDP2 after every backward unless
# set_requires_gradient_sync(False) (then "last": the unsharded gradients wait).
GRAD_SYNC = {0: "last", 1: "last", 2: "every", 3: "every"}
GRAD_SYNCS = ("every", "last")


def grad_syncs(
    stage: int, micro_batches: int, grad_sync: str | None = None
) -> list[bool]:
    """For each of the step's micro-batches, whether its backward reduces the gradients:
    every one ("every"), or only the last ("last"); None: the stage's GRAD_SYNC."""
    sync = grad_sync or GRAD_SYNC[stage]
    return [sync == "every" or m == micro_batches - 1 for m in range(micro_batches)]
