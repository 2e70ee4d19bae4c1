"""How a published measurement is written down (zerobook.perfmodel.published's ROWS): its
source, its quote, its inputs, how its loss kept the logits, what had to be assumed; and MPT as
MosaicML benchmarked it."""

from __future__ import annotations

from zerobook.perfmodel.models import ModelSpec

FOUNDRY = "mosaicml_llmfoundry_bench"
NDMV4 = "microsoft_mscclpp_ndmv4"
WHERE = {
    FOUNDRY: "mosaicml/llm-foundry, scripts/train/benchmarking/README.md",
    NDMV4: "microsoft/mscclpp, docs/performance-ndmv4.md (NCCL 2.17.1, in-place)",
    "liang2024torchtitan": "pytorch/torchtitan, docs/performance.md",
}
# How each source's runs computed the loss (a key of inputs.LOSS_LOGIT_BYTES), and why we say so
LOSSES = {
    FOUNDRY: (
        "fused",
        "llm-foundry's MPT takes loss_fn 'fused_crossentropy' by default (flash-attn's "
        "CrossEntropyLoss, inplace_backward off; it raises if flash-attn is missing), and "
        "the yamls submit_benchmarks.py reads leave it unset (at 300cc5c58 and b2a43a147, "
        "the commits that published these tables)",
    ),
    "liang2024torchtitan": (
        "fp32",
        "torchtitan computed F.cross_entropy on fp32 logits: at commit 1ea476e9f (April "
        "2024) its Llama returns self.output(h).float() (torchtitan/models/llama/model.py) "
        "and train.py takes F.cross_entropy of it; the case chapters/memory_accounting "
        "measures",
    ),
}


def mpt(layers: int, hidden: int, seq_len: int) -> ModelSpec:
    """MosaicML's MPT as benchmarked: GELU MLP of 4h, biases, LayerNorm with bias, the
    embedding tied, learned positions of seq_len, a 50,368-entry vocabulary (these give
    the table's NumParams exactly)."""
    return ModelSpec(
        f"MPT {layers} x {hidden}",
        layers=layers,
        hidden=hidden,
        heads=hidden // 128,
        kv_heads=hidden // 128,
        ffn=4 * hidden,
        vocab=50368,
        gated=False,
        tied=True,
        biases=True,
        norm_params=2,
        positions=seq_len,
    )


def busbw_row(id, cite, quote, published, gpus, size, hardware, assumed, where,
              collective="all_reduce", per_node=8, outside=None):  # fmt: skip
    """nccl-tests' busbw of `collective` on `gpus` GPUs, `per_node` to a node, at `size`
    bytes; `outside`: why a row outside the goal is kept, and what it shows."""
    return {
        "id": id,
        "kind": "busbw",
        "collective": collective,
        "per_node": per_node,
        "outside": outside,
        "cite": cite,
        "where": where,
        "quote": quote,
        "published": published,
        "gpus": gpus,
        "size": size,
        "hardware": hardware,
        "assumed": assumed,
        "fitted": False,
    }


def tokens_row(
    id,
    cite,
    quote,
    published,
    gpus,
    model,
    hardware,
    micro,
    seq,
    ac,
    assumed,
    fitted=False,
    reduce="fp32",
    accumulate=1,
):
    """A run's throughput, with what it ran: `micro` sequences of `seq` tokens per
    micro-batch, `accumulate` micro-batches per step (each reduce-scattered: Composer syncs
    FSDP every micro-batch, composer/distributed/dist_strategy.py, ddp_sync_context), the
    gradients reduced in `reduce` (MosaicML's MP Mode DEFAULT and torchtitan's default: fp32;
    PURE: bf16); the loss as the source's runs computed it (LOSSES)."""
    where, (loss, loss_source) = WHERE[cite], LOSSES[cite]
    return {
        "id": id,
        "kind": "tokens",
        "cite": cite,
        "where": where,
        "quote": quote,
        "published": published,
        "gpus": gpus,
        "model": model,
        "hardware": hardware,
        "micro_batch": micro,
        "seq_len": seq,
        "checkpointing": ac,
        "reduce_dtype": reduce,
        "micro_batches": accumulate,
        "loss": loss,
        "loss_source": loss_source,
        "outside": None,
        "assumed": assumed,
        "fitted": fitted,
    }
