"""How long one training step takes, and how much memory it needs, under DDP, ZeRO-1/2/3 and HSDP:
a model built from the course's own pieces (the calculator's bytes, the ring's traffic, the
α-β model of a link), checked against runs here and against published results. Pure arithmetic.

    p = predict_step(LLAMA3_8B, H100_NODE, world_size=64, gpus_per_node=8, stage=3,
                     micro_batch=1, seq_len=8192)
    p.step_s, p.exposed_comm_s, p.mfu, p.peak_memory_bytes, p.timeline

The step is scheduled as operations on a computation stream and a communication stream
(zerobook.perfmodel.schedule); see zerobook.perfmodel.step for the assumptions.

Its JavaScript twin, zerobook/assets/perfmodel.js, repeats collectives.collective_seconds,
step.StepProgram and predict_step operation for operation, so the step explorer predicts in the
page without a kernel; tests/test_widgets.py compares the two to the bit. Change both.
"""

from __future__ import annotations

from dataclasses import dataclass

from zerobook.accounting import memory
from zerobook.perfmodel.collectives import collective_seconds, nccl_choice
from zerobook.perfmodel.critical import critical_tokens_per_gpu
from zerobook.perfmodel.models import (
    GPT3_175B,
    LLAMA3_8B,
    LLAMA3_70B,
    MODELS,
    ModelSpec,
)
from zerobook.perfmodel import zeropp as zero_pp
from zerobook.perfmodel.inputs import (
    ALLOCATOR_MARGIN,
    ELEMENT_BYTES,
    LOGIT_BYTES,
    LOSS_LOGIT_BYTES,
    check,
)
from zerobook.perfmodel.schedule import Span
from zerobook.perfmodel.accumulation import grad_syncs
from zerobook.perfmodel.step import OPTIMIZER_BYTES_PER_ELEMENT, Layout, StepProgram

# ALLOCATOR_MARGIN, LOGIT_BYTES (and LOSS_LOGIT_BYTES), with their sources: perfmodel.inputs
COMPUTATIONS = (
    "forward",
    "backward",
    "optimizer step",
)  # a span's `what` when it computes; else it communicates

__all__ = [
    "collective_seconds",
    "critical_tokens_per_gpu",
    "LOSS_LOGIT_BYTES",
    "nccl_choice",
    "GPT3_175B",
    "LLAMA3_70B",
    "LLAMA3_8B",
    "MODELS",
    "ModelSpec",
    "Prediction",
    "predict_step",
]


@dataclass(frozen=True)
class Prediction:
    """One step on one GPU: seconds busy computing and communicating, the communication the
    computation waited for, the step, its memory (and the terms of it), MFU, and the schedule."""

    compute_s: float
    comm_s: float
    exposed_comm_s: float
    step_s: float
    peak_memory_bytes: float
    memory: dict
    mfu: float
    tokens_per_second: float
    fits: bool
    timeline: list[Span]


def step_times(
    model: ModelSpec,
    hardware,
    tokens: int,
    seq_len: int,
    checkpointing,
    shard_elements: float,
) -> dict:
    """Seconds of each computation of one micro-batch on one GPU."""
    rate = hardware.peak_flops * hardware.sustained
    elementwise = (
        tokens * model.hidden * hardware.elementwise_bytes / hardware.memory_bandwidth
    )
    forward = model.block_forward_flops(tokens, seq_len) / rate + elementwise
    root = model.root_forward_flops(tokens) / rate
    recompute = forward if checkpointing == "full" else 0.0
    return {
        "block_forward": forward,
        "block_backward": 2 * forward + recompute,
        "root_forward": root,
        "root_backward": 2 * root,
        "optimizer": shard_elements
        * OPTIMIZER_BYTES_PER_ELEMENT
        / hardware.memory_bandwidth,
    }


def peak_memory(
    model: ModelSpec,
    stage: int,
    group: int,
    tokens: int,
    checkpointing,
    prefetch: bool,
    accumulated: int = 0,
    margin: float = ALLOCATOR_MARGIN,
    secondary: float = 0.0,
    logit_bytes: float = LOGIT_BYTES,
) -> dict:
    """The terms of a GPU's peak: model states (the calculator, sharded over the group), the
    activations backward keeps, the logits, full 16-bit units gathered (stage 3), the
    gradients `accumulated` unsharded between micro-batches (bytes per element: FSDP2 keeps
    them in the reduction dtype, FSDPParam.to_accumulated_grad_if_needed; stages 2-3 synced
    only on the last), a margin; `logit_bytes` per logit at backward's start (LOGIT_BYTES)."""
    psi = model.num_params()
    terms = {
        "model states": memory.model_state_bytes(
            psi, stage=stage, world_size=group
        ).total,
        "activations": model.layers
        * model.block_activation_bytes(tokens, checkpointing),
        "logits": tokens * model.vocab * logit_bytes,
    }
    if checkpointing == "full":  # one block's activations while it is recomputed
        terms["activations"] += model.block_activation_bytes(tokens, None)
    if stage == 3:  # the root, and one block (two while the next is prefetched)
        terms["gathered units"] = 2 * (
            model.root_params() + (2 if prefetch else 1) * model.block_params()
        )
    if accumulated and stage >= 2:
        terms["accumulated gradients"] = accumulated * psi
    if secondary:  # ZeRO++'s hpZ: the 16-bit weights sharded again inside the node
        terms["secondary shard"] = secondary * psi
    terms["allocator margin"] = margin * sum(terms.values())
    return terms


def predict_step(
    model: ModelSpec,
    hardware,
    *,
    world_size: int,
    gpus_per_node: int,
    stage: int,
    micro_batch: int,
    seq_len: int,
    activation_checkpointing=None,
    prefetch: bool = True,
    dtype: str = "bf16",
    shard_group: int | None = None,
    allow_oom: bool = False,
    bucket_params: int | None = None,
    param_gather: str = "after_step",
    reduce_dtype: str | None = None,
    micro_batches: int = 1,
    grad_sync: str | None = None,
    allocator_margin: float = ALLOCATOR_MARGIN,
    logit_bytes: float = LOGIT_BYTES,
    zeropp=(),
    quantizer: str = "unfused",
) -> Prediction:
    """One training step of `model` on `world_size` GPUs of `hardware` in nodes of
    `gpus_per_node`: DDP (stage 0) or ZeRO stage 1-3 sharding over all ranks, or over groups of
    `shard_group` (HSDP: replicated across groups). `micro_batch` sequences of `seq_len` tokens
    per GPU. Stages 0-2 reduce gradients per unit, or in buckets of `bucket_params` elements (DDP
    and our ZeRO-1/2; stage 3 always per unit). `param_gather` (stages 1-2): the updated weights'
    all-gather "after_step", exposed, as DeepSpeed's ZeRO-1/2 and ours run it, or block by block
    ahead of the "next_forward", overlapped, as Megatron's distributed optimizer does with
    overlap_param_gather (off by default: Megatron-LM's DistributedDataParallelConfig).
    `reduce_dtype`: the gradients' reductions (None: `dtype`; "fp32" as torchtitan reduces by
    default, FSDP2's MixedPrecisionPolicy(reduce_dtype=torch.float32)). `micro_batches` k per
    step (gradient accumulation), each `micro_batch` sequences: stage 3 gathers for every one,
    and the gradients are reduced after every one or the last (`grad_sync`, None: the stage's
    default, step.GRAD_SYNC). `allocator_margin`: the memory reserved beyond what is allocated,
    as a fraction of it. `logit_bytes`: the loss's bytes per logit at the start of backward
    (inputs.LOSS_LOGIT_BYTES: 12 for F.cross_entropy on fp32 logits, 2-4 fused). `zeropp`:
    ZeRO++'s parts for stage 3, any of "qwZ", "hpZ", "qgZ" (zerobook.perfmodel.zeropp);
    `quantizer`: how qwZ's quantize and dequantize passes are priced, "unfused" (measured),
    "fused" (DeepSpeed's kernels, a bound) or "none" (zeropp.QUANTIZERS).
    Raises ValueError on bad input, and when the step does not fit in the GPU's memory (unless
    allow_oom: then `fits` says so)."""
    check(
        model,
        hardware,
        world_size=world_size,
        gpus_per_node=gpus_per_node,
        stage=stage,
        micro_batch=micro_batch,
        seq_len=seq_len,
        checkpointing=activation_checkpointing,
        dtype=dtype,
        shard_group=shard_group,
        bucket_params=bucket_params,
        param_gather=param_gather,
        reduce_dtype=reduce_dtype,
        micro_batches=micro_batches,
        grad_sync=grad_sync,
        allocator_margin=allocator_margin,
        logit_bytes=logit_bytes,
    )
    parts = zero_pp.check(zeropp, stage)
    if parts and shard_group not in (None, world_size):
        raise ValueError("ZeRO++ shards over every rank: leave shard_group out")
    group = shard_group or world_size
    layout, tokens = Layout(world_size, gpus_per_node, group), micro_batch * seq_len
    shard = model.num_params() / (group if stage else 1)
    times = step_times(
        model, hardware, tokens, seq_len, activation_checkpointing, shard
    )
    program = StepProgram(
        model,
        hardware,
        layout,
        stage,
        times,
        ELEMENT_BYTES[dtype],
        prefetch,
        bucket_params,
        param_gather,
        ELEMENT_BYTES[reduce_dtype or dtype],
        micro_batches,
        grad_sync,
        parts,
        quantizer,
    ).build()
    timeline = program.schedule()
    waits = micro_batches > 1 and not grad_syncs(stage, micro_batches, grad_sync)[0]
    memory_terms = peak_memory(
        model,
        stage,
        group,
        tokens,
        activation_checkpointing,
        prefetch,
        ELEMENT_BYTES[reduce_dtype or dtype] if waits else 0,
        allocator_margin,
        ELEMENT_BYTES[dtype] / min(gpus_per_node, world_size)
        if "hpZ" in parts
        else 0.0,
        logit_bytes,
    )
    peak, fits = (
        sum(memory_terms.values()),
        sum(memory_terms.values()) <= hardware.memory_bytes,
    )
    if not fits and not allow_oom:
        raise ValueError(
            f"{model.name} does not fit: {peak / 1e9:.1f} GB per GPU needed "
            f"({', '.join(f'{k} {v / 1e9:.1f}' for k, v in memory_terms.items())}), "
            f"{hardware.memory_bytes / 1e9:.0f} GB on the GPU"
        )
    return summarize(
        model, hardware, timeline, micro_batches * tokens, seq_len, memory_terms, fits
    )


def summarize(
    model,
    hardware,
    timeline: list[Span],
    tokens: int,
    seq_len: int,
    memory_terms: dict,
    fits: bool,
):
    """Busy times per stream, the step's length, what the computation waited for, MFU
    (`tokens`: the step's, every micro-batch's)."""
    busy = {"compute": 0.0, "communication": 0.0}
    for span in timeline:
        kind = "compute" if span.what in COMPUTATIONS else "communication"
        busy[kind] += span.end - span.start
    step = max(span.end for span in timeline)
    mfu = model.flops_per_token(seq_len) * tokens / (step * hardware.peak_flops)
    return Prediction(
        busy["compute"],
        busy["communication"],
        step - busy["compute"],
        step,
        sum(memory_terms.values()),
        memory_terms,
        mfu,
        tokens / step,
        fits,
        timeline,
    )
