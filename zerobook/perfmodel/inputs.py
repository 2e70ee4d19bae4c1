"""The step model's inputs: the element sizes, losses and schedules it knows, the allocator's
margin, and clear errors for inputs it cannot price (zerobook.perfmodel.predict_step)."""

from __future__ import annotations

from zerobook.perfmodel.models import CHECKPOINTING
from zerobook.perfmodel.accumulation import GRAD_SYNCS

ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# Bytes per logit at the start of backward (every block's activations still held), by how the
# loss is computed; predict_step(logit_bytes=) takes any number.
LOSS_LOGIT_BYTES = {
    # F.cross_entropy(logits.float()): the fp32 log-probabilities, their gradient and the fp32
    # logits' gradient, measured in chapters/memory_accounting; torchtitan's loss
    "fp32": 12,
    # flash-attn's fused cross-entropy (flash_attn/ops/triton/cross_entropy.py; v1's xentropy
    # alike): saves the 16-bit logits, backward writes dlogits = torch.empty_like(logits)
    # (unless inplace_backward); llm-foundry's default loss_fn, "fused_crossentropy"
    "fused": 4,
    # Liger's LigerCrossEntropyFunction (src/liger_kernel/ops/cross_entropy.py): its forward
    # writes the gradient into the 16-bit logits' own storage; flash-attn's, inplace_backward
    "fused_inplace": 2,
}
LOGIT_BYTES = LOSS_LOGIT_BYTES["fp32"]  # as the course measures it
# The caching allocator's reserved bytes beyond the allocated ones at the peak, as a fraction:
# the middle, rounded, of what the measurements allow (tests/test_perfmodel_memory.py derives
# it): no less than the least the course's GPU check measured (4.7%, DDP; 5-70% over its
# methods, on models of 1-3 GB: benchmarks/results/gpu_h200_2026-11-26.json, as on the H100 on
# 2026-11-25), no more than the most with which every published run the model prices still
# fits (16.7%: MPT-7B on 8 A100s, published.margin_ceiling). Under pressure the allocator frees
# its cached blocks and retries (c10/cuda/CUDACachingAllocator.cpp, release_cached_blocks), so
# a small model's overhead overstates a full GPU's.
ALLOCATOR_MARGIN = 0.11
PARAM_GATHERS = (
    "after_step",
    "next_forward",
)  # stages 1-2: exposed, or overlapped (Megatron)


def positive(**values) -> None:
    """ValueError naming the first value that is not a positive integer."""
    for name, value in values.items():
        if not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_layout(world_size, gpus_per_node, stage, shard_group, hardware) -> None:
    """Whole nodes, and a shard group that divides the ranks into whole nodes or parts of one."""
    if world_size > gpus_per_node and world_size % gpus_per_node:
        raise ValueError(
            f"world_size {world_size} is not a multiple of gpus_per_node {gpus_per_node}"
        )
    g = shard_group
    if g is not None and (stage == 0 or g < 1 or world_size % g):
        raise ValueError(
            f"shard_group {g} must divide world_size {world_size} (and stage >= 1)"
        )
    if g is not None and (
        g > gpus_per_node
        and g % gpus_per_node
        or g < gpus_per_node
        and gpus_per_node % g
    ):
        raise ValueError(
            f"shard_group {g} must be whole nodes or divide a node of {gpus_per_node} GPUs"
        )
    if gpus_per_node > hardware.gpus_per_node:
        raise ValueError(
            f"gpus_per_node {gpus_per_node} is more than {hardware.name}'s {hardware.gpus_per_node}"
        )


def check(
    model,
    hardware,
    *,
    world_size,
    gpus_per_node,
    stage,
    micro_batch,
    seq_len,
    checkpointing,
    dtype,
    shard_group,
    bucket_params=None,
    param_gather="after_step",
    reduce_dtype=None,
    micro_batches=1,
    grad_sync=None,
    allocator_margin=ALLOCATOR_MARGIN,
    logit_bytes=LOGIT_BYTES,
) -> None:
    """Clear errors for inputs the model cannot price."""
    positive(
        world_size=world_size,
        gpus_per_node=gpus_per_node,
        micro_batch=micro_batch,
        seq_len=seq_len,
        micro_batches=micro_batches,
    )
    check_layout(world_size, gpus_per_node, stage, shard_group, hardware)
    if (
        stage not in (0, 1, 2, 3)
        or checkpointing not in CHECKPOINTING
        or dtype not in ELEMENT_BYTES
        or reduce_dtype not in (None, *ELEMENT_BYTES)
    ):
        raise ValueError(
            f"stage must be 0-3, activation_checkpointing one of {CHECKPOINTING}, dtype and "
            f"reduce_dtype one of {list(ELEMENT_BYTES)} (reduce_dtype also None): got "
            f"{stage!r}, {checkpointing!r}, {dtype!r}, {reduce_dtype!r}"
        )
    if param_gather not in PARAM_GATHERS:
        raise ValueError(
            f"param_gather must be one of {PARAM_GATHERS}, got {param_gather!r}"
        )
    if grad_sync not in (None, *GRAD_SYNCS):
        raise ValueError(
            f"grad_sync must be one of {GRAD_SYNCS} or None, got {grad_sync!r}"
        )
    if bucket_params is not None:
        positive(bucket_params=bucket_params)
    if not (isinstance(allocator_margin, (int, float)) and 0 <= allocator_margin < 10):
        raise ValueError(
            f"allocator_margin must be a fraction of the allocated bytes, 0 to 10, got "
            f"{allocator_margin!r}"
        )
    if not (isinstance(logit_bytes, (int, float)) and 0 <= logit_bytes <= 64):
        raise ValueError(
            f"logit_bytes must be the bytes per logit, 0 to 64 (LOSS_LOGIT_BYTES), got "
            f"{logit_bytes!r}"
        )
