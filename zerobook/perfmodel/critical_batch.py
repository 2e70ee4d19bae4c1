"""The global-batch ceiling of ZeRO-3 alone: in data parallelism (DDP, ZeRO, HSDP) every GPU
takes tokens of its own, so a step's batch is tokens per GPU x N. To hide ZeRO-3's collectives
each micro-batch needs T* tokens per GPU (critical.critical_tokens_per_gpu), and without context
parallelism at least one whole sequence: the least batch a step of ZeRO-3 alone over N GPUs can
take and still hide its traffic is N x k x max(T*, seq_len). Past the N at which that reaches a
stated batch (a published run's, or a critical batch), ZeRO-3 alone needs more tokens a step than
training uses well. Pure arithmetic.

    least_global_batch(H100_NODE, world_size=1024, gpus_per_node=8)   # ~2.15M tokens
    largest_world_size(H100_NODE, 16 * MEBI, gpus_per_node=8, reduce_bytes=4)   # ~6,000 GPUs
    PUBLISHED_BATCHES   # GPT-3's 3.2M, Llama 3 405B's 4M -> 8M -> 16M, DeepSeek-V3's 15,360 x 4K

Sources, each read in its paper: the critical batch, McCandlish et al. 2018, "An Empirical Model of
Large-Batch Training" (arXiv:1812.06162); GPT-3, Brown et al. 2020 (arXiv:2005.14165), Table 2.1
and section 2.3; Llama 3, Dubey et al. 2024 (arXiv:2407.21783), section 3.4.1 and Table 4;
DeepSeek-V3, DeepSeek-AI 2024 (arXiv:2412.19437), section 4.2.
"""

from __future__ import annotations

from dataclasses import dataclass

from zerobook.perfmodel.critical import critical_tokens_per_gpu

MEBI = 2**20  # Llama 3's "M" of tokens: Table 4's 16M is 64 x 32 x 8,192 = 16,777,216


@dataclass(frozen=True)
class PublishedBatch:
    """One pre-training run's global batch: tokens per optimizer step, its sequence length,
    where the paper states it, and what had to be read into it."""

    run: str
    stated: str  # as the paper prints it
    tokens: float
    seq_len: int
    source: str
    reading: str = ""


PUBLISHED_BATCHES = (
    PublishedBatch(
        "GPT-3 175B", "3.2M", 3.2e6, 2048,
        "Brown et al. 2020, Table 2.1: batch size 3.2M (tokens); section 2.3: chosen with "
        "the gradient noise scale [McCandlish et al. 2018]",
        "3.2M as printed: it is not a whole number of 2,048-token sequences, so rounded",
    ),
    PublishedBatch(
        "Llama 3 405B, start", "4M", 4 * MEBI, 4096,
        "Dubey et al. 2024, section 3.4.1: 'an initial batch size of 4M tokens and "
        "sequences of length 4,096'",
        "M read as 2^20, as Table 4's 16M is (1,024 sequences)",
    ),
    PublishedBatch(
        "Llama 3 405B, after 252M tokens", "8M", 8 * MEBI, 8192,
        "section 3.4.1: 'double these values to a batch size of 8M sequences of 8,192 "
        "tokens after pre-training 252M tokens'",
        "1,024 sequences of 8,192",
    ),
    PublishedBatch(
        "Llama 3 405B, after 2.87T tokens", "16M", 16 * MEBI, 8192,
        "section 3.4.1: 'We double the batch size again to 16M after pre-training on "
        "2.87T tokens'; Table 4: DP 64 x batch size/DP 32 x 8,192 on 8,192 GPUs",
    ),
    PublishedBatch(
        "DeepSeek-V3", "15,360 x 4K", 15360 * 4096, 4096,
        "DeepSeek-AI 2024, section 4.2: 'the batch size is gradually increased from 3072 "
        "to 15360 in the training of the first 469B tokens'; 'maximum sequence length "
        "to 4K during pre-training'",
        "the unit is not named: read as sequences of 4,096 tokens (62.9M tokens)",
    ),
)  # fmt: skip

# Llama 3 405B's runs (Dubey et al. 2024, Table 4): GPUs, TP, CP, PP, DP, sequence, tokens a step
LLAMA3_405B_RUNS = (
    (8192, 8, 1, 16, 64, 8192, 16 * MEBI),
    (16384, 8, 1, 16, 128, 8192, 16 * MEBI),
)


def least_global_batch(
    hardware,
    *,
    world_size: int,
    gpus_per_node: int,
    seq_len: int = 0,
    micro_batches: int = 1,
    **options,
) -> float:
    """Tokens per step at the least for ZeRO-3 alone over `world_size` GPUs to hide its
    collectives: N x k x max(T*, seq_len), T* the tokens one micro-batch needs per GPU
    (critical_tokens_per_gpu with `options`: reduce_bytes, shard_group, zeropp...) and
    `seq_len` a whole sequence per GPU (0: sequences may be cut, as context parallelism does).
    Only as good as T*: bandwidth, not latency, with overlap taken as free."""
    per_micro = critical_tokens_per_gpu(
        hardware, world_size=world_size, gpus_per_node=gpus_per_node, **options
    )
    return world_size * micro_batches * max(per_micro, seq_len)


def largest_world_size(
    hardware, batch_tokens: float, *, gpus_per_node: int, **options
) -> int:
    """The largest N, in whole nodes of `gpus_per_node`, whose least_global_batch is within
    `batch_tokens`: past it ZeRO-3 alone cannot hide its traffic without a larger batch (0
    where not even one node can). Bisection: the least batch grows with N."""
    least = lambda nodes: least_global_batch(  # noqa: E731
        hardware,
        world_size=nodes * gpus_per_node,
        gpus_per_node=gpus_per_node,
        **options,
    )
    if least(1) > batch_tokens:
        return 0
    low, high = 1, 2
    while least(high) <= batch_tokens:
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if least(mid) <= batch_tokens else (low, mid)
    return low * gpus_per_node


def ceiling_lines(
    hardware, gpus, *, gpus_per_node: int = 8, seq_len: int = 8192
) -> dict:
    """The least global batch (tokens) at each of `gpus`, for the lines the chapter draws: ZeRO-3
    with gradients in bf16, in fp32, and one `seq_len` sequence per GPU (its floor without
    context parallelism)."""
    ways = {
        "ZeRO-3, gradients in bf16": {},
        "ZeRO-3, gradients in fp32": {"reduce_bytes": 4},
    }
    lines = {
        label: [
            least_global_batch(hardware, world_size=n,
                               gpus_per_node=min(n, gpus_per_node), **options)
            for n in gpus
        ]
        for label, options in ways.items()
    }  # fmt: skip
    lines[f"one {seq_len:,}-token sequence per GPU"] = [n * seq_len for n in gpus]
    return lines
