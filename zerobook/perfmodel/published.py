"""Published measurements the performance model is checked against, each with its
source, its inputs and what had to be assumed; and the model's prediction of each.

    rows = predict_all()  # [{"id", "kind", "published", "predicted", "ratio", ...}]

Two kinds: nccl-tests' bus bandwidth of all-reduce and all-gather (GB/s, 10^9 bytes/s)
and training throughput with FSDP's full sharding (tokens per second per GPU). One row is fitted, and
marked so: the MPT-7B run on 8 A100s fixes hardware.ELEMENTWISE_BYTES (a fitted overhead:
all a block costs beyond its matmuls at the sustained rate); every other row is predicted from the presets, the shapes
and the schedule. Rows that used tensor or pipeline parallelism beside FSDP are left out
(the step model does not price them). The training rows span 8 to 512 GPUs (MosaicML's
FSDP runs on 512 H100s); no run of FSDP alone on 1,024 GPUs or more was found published
with a throughput and the settings a prediction needs. No healthy published reduce_scatter_perf
figure across nodes was found (only bug reports); the one all-gather across H100 nodes found
(323.5 GB/s on 4 nodes, a benchmark repository's) states its NICs two ways and is left out. A
row outside the goal is kept, with why (`outside`). The rows' builders: perfmodel.rows.
"""

from __future__ import annotations

from zerobook.accounting.hardware import A100_NODE, H100_NODE
from zerobook.perfmodel.collectives import collective_seconds
from zerobook.perfmodel.inputs import LOSS_LOGIT_BYTES
from zerobook.perfmodel.models import LLAMA3_8B, LLAMA3_70B
from zerobook.perfmodel.rows import FOUNDRY, NDMV4, WHERE, busbw_row, mpt, tokens_row

GOAL = {"busbw": 0.20, "tokens": 0.25}  # the ratio's goal: within 20% and 25% of 1
HARDWARE = {
    "A100": A100_NODE,
    "H100": H100_NODE,
    # A100 40 GB: HBM2 at 1,555 GB/s (NVIDIA A100 datasheet); network as the 80 GB nodes
    "A100 40GB": A100_NODE.with_(memory_bytes=40e9, memory_bandwidth=1.555e12),
}
# MosaicML's H100 rows at 128 GPUs and more: the network is not stated
LARGE_SCALE = (
    "network not stated: 8 x 400 Gb/s per node (with half of it the prediction moves "
    "by under 1%)"
)


# fmt: off
ROWS = [
    busbw_row(
        "A100 x 8, one node", "nccltests_issue175",
        "singleNode, ./build/all_reduce_perf -b 8 -e 4G -f 2 -g 8, result: 232.54GB/s",
        232.54, 8, 2**32, "A100", "the figure is the largest size's, 4 GiB",
        "NVIDIA/nccl-tests#175"),
    busbw_row(
        "H100 x 8, one node (NVLS)", "nccltests_issue290",
        "476GB/s looks to be in the expected range for H100", 476.0, 8, 2**32, "H100",
        "the run's largest size, 4 GiB (maxBytes 4294967296)", "NVIDIA/nccl-tests#290"),
    busbw_row(
        "DGX A100 nodes, 8 x 200 Gb/s", "nccl_issue812",
        "On an Nvidia DGX-A100 system we have 8x200Gbit/s IB cards and we measure "
        "192GB/s AllReduce BusBW.", 192.0, 32, 2**32, "A100",
        "node count not stated: 4 nodes (2-node trees exceed the NICs, the same "
        "comment says); 4 GiB", "NVIDIA/nccl#812"),
    busbw_row(
        "H200 x 1,984 (248 nodes)", "nccltests_issue283",
        "248 GPU servers [...] each equipped with 8 H200 GPUs [...] the bus bandwidth "
        "[...] typically measuring around 350G", 350.0, 1984, 2**29, "H100",
        "8 HCAs at NDR 400 Gb/s (speed not stated); H200 = H100's NVLink 4 and "
        "NVSwitch; --minbytes 512M --maxbytes 512M", "NVIDIA/nccl-tests#283"),
    busbw_row(
        "A100 x 8, one node, all-gather (NDmv4)", NDMV4,
        "1 node, 8 gpus/node [...] BusBW (GB/s) [...] 1G | 253.59 (NCCL AllGather)", 253.59, 8,
        2**30, "A100", "NDmv4: 8 A100 80 GB on NVLink 3", WHERE[NDMV4],
        collective="all_gather"),
    busbw_row(
        "A100 x 16 (2 nodes), all-gather (NDmv4)", NDMV4,
        "2 nodes, 8 gpus/node [...] 4G | 186.01 (NCCL AllGather)", 186.01, 16, 2**32, "A100",
        "NDmv4's eight 200 Gb/s HDR InfiniBand NICs per node (Azure's ND A100 v4; not stated "
        "on the page)", WHERE[NDMV4], collective="all_gather"),
    busbw_row(
        "A100 x 16 (2 nodes), all-reduce (NDmv4)", NDMV4,
        "2 nodes, 8 gpus/node [...] 4G | [...] | 188.18 (NCCL AllReduce)", 188.18, 16, 2**32,
        "A100", "as the all-gather row", WHERE[NDMV4]),
    busbw_row(
        "A100 x 2 (one per node), all-gather (NDmv4)", NDMV4,
        "2 nodes, 1 gpu/node [...] 1G | 15.84 (NCCL AllGather)", 15.84, 2, 2**30, "A100",
        "one 200 Gb/s NIC per GPU", WHERE[NDMV4], collective="all_gather", per_node=1,
        outside="with one GPU per node, its one NIC carried 15.8 GB/s (18.7 in the all-reduce), "
        "where the model takes the 24 GB/s NVIDIA quotes as a 200 Gb/s NIC's peak; the same "
        "system's rows of 8 GPUs per node agree with the model, and the page does not say why "
        "one NIC fell short"),
    tokens_row(
        "MPT-7B, 8 A100 (fitted)", FOUNDRY,
        "7b | 2048 | 8 | a100_80gb | 64.23 | [...] | 6 | 2 | [...] | 4641 | [...] | "
        "amp_bf16 | DEFAULT | FULL_SHARD | False", 4641, 8, mpt(32, 4096, 2048), "A100", 6, 2048, None,
        "GradAccum 2", fitted=True, accumulate=2),
    tokens_row(
        "MPT-70B, 64 A100", FOUNDRY,
        "70b | 2048 | 64 | a100_80gb | 53.33 | [...] | 8 | 4 | [...] | 410 | [...] | "
        "bf16 | PURE | FULL_SHARD | True", 410, 64, mpt(80, 8192, 2048), "A100", 8, 2048, "full",
        "1600 Gbps RoCE per node = 8 x 200 Gb/s; GradAccum 4", reduce="bf16", accumulate=4),
    tokens_row(
        "MPT-7B, 128 A100 40GB", FOUNDRY,
        "7b | 2048 | 128 | a100_40gb | 50.14 | [...] | 18 | 1 | [...] | 3623 | [...] | "
        "bf16 | PURE | FULL_SHARD | True", 3623, 128, mpt(32, 4096, 2048), "A100 40GB", 18, 2048,
        "full", "1600 Gbps RoCE per node = 8 x 200 Gb/s", reduce="bf16"),
    tokens_row(
        "MPT-7B, 8 H100", FOUNDRY,
        "7b | 2048 | 8 | h100_80gb | 46.44 | [...] | 6 | 1 | [...] | 10643 | [...] | "
        "amp_bf16 | DEFAULT | FULL_SHARD | False", 10643, 8, mpt(32, 4096, 2048), "H100", 6, 2048, None,
        "nothing beyond the table's own settings"),
    tokens_row(
        "MPT-70B, 64 H100", FOUNDRY,
        "70b | 2048 | 64 | h100_80gb | 42.57 | [...] | 8 | 4 | [...] | 1039 | [...] | "
        "amp_bf16 | DEFAULT | FULL_SHARD | True", 1039, 64, mpt(80, 8192, 2048), "H100", 8, 2048, "full",
        "network not stated: 8 x 400 Gb/s per node; GradAccum 4", accumulate=4),
    # MosaicML's "H100 80GB BF16 (Large Scale, >= 128 GPUs)" table: FSDP alone on 512
    tokens_row(
        "MPT-7B, 512 H100", FOUNDRY,
        "7b | 2048 | 512 | h100_80gb | 42.2 | [...] | 6 | 1 | [...] | 9670 | [...] | "
        "amp_bf16 | DEFAULT | FULL_SHARD | False", 9670, 512, mpt(32, 4096, 2048), "H100", 6, 2048, None,
        LARGE_SCALE),
    tokens_row(
        "MPT-13B, 512 H100", FOUNDRY,
        "13b | 2048 | 512 | h100_80gb | 41.12 | [...] | 16 | 1 | [...] | 4952 | [...] | "
        "amp_bf16 | DEFAULT | FULL_SHARD | True", 4952, 512, mpt(40, 5120, 2048), "H100", 16, 2048, "full",
        LARGE_SCALE),
    tokens_row(
        "MPT-30B, 512 H100", FOUNDRY,
        "30b | 2048 | 512 | h100_80gb | 40.27 | [...] | 8 | 1 | [...] | 2115 | [...] | "
        "amp_bf16 | DEFAULT | FULL_SHARD | True", 2115, 512, mpt(48, 7168, 2048), "H100", 8, 2048, "full",
        LARGE_SCALE),
    tokens_row(
        "MPT-70B, 512 H100", FOUNDRY,
        "70b | 2048 | 512 | h100_80gb | 41.25 | [...] | 8 | 1 | [...] | 1007 | [...] | "
        "amp_bf16 | DEFAULT | FULL_SHARD | True", 1007, 512, mpt(80, 8192, 2048), "H100", 8, 2048, "full",
        LARGE_SCALE),
    tokens_row(
        "torchtitan Llama 3 8B, 64 A100", "liang2024torchtitan",
        "| 8B | 1 | selective layer | 2904 | 56.8% |", 2904, 64, LLAMA3_8B, "A100", 1,
        8192, "layer", "selective layer AC checkpoints every second block: half the "
        "blocks recompute their forward; gradients reduced in fp32, torchtitan's "
        "default (mixed_precision_reduce), not stated with the figure"),
    tokens_row(
        "torchtitan Llama 3 70B, 64 A100", "liang2024torchtitan",
        "| 70B | 1 | full | 331 | 51.7% |", 331, 64, LLAMA3_70B, "A100", 1, 8192, "full",
        "gradients reduced in fp32, torchtitan's default (mixed_precision_reduce), not "
        "stated with the figure"),
]
# fmt: on


def predict_busbw(row: dict, hardware=None) -> float:
    """nccl-tests' busbw, in GB/s: S / t x 2 (N-1)/N for an all-reduce, S / t x (N-1)/N for an
    all-gather (S: the whole gathered buffer, as nccl-tests' size)."""
    n, hardware = row["gpus"], hardware or HARDWARE[row["hardware"]]
    kind = row["collective"]
    seconds = collective_seconds(
        kind,
        row["size"],
        world_size=n,
        gpus_per_node=row["per_node"],
        hardware=hardware,
    )
    factor = 2 if kind == "all_reduce" else 1
    return row["size"] / seconds * factor * (n - 1) / n / 1e9


def row_steps(row: dict, hardware=None, reduce_dtype=None, **options) -> list:
    """predict_step of the row's run as it ran (FSDP's full sharding, prefetch, its
    micro-batches, weights gathered in bf16, its gradients' dtype or `reduce_dtype`, its loss's
    bytes per logit; `options`: more of predict_step's, allow_oom say): one Prediction, two for
    "layer" checkpointing (every block recomputed, and none: "matmul_inputs")."""
    from zerobook.perfmodel import predict_step

    hardware = hardware or HARDWARE[row["hardware"]]
    run = {
        "world_size": row["gpus"],
        "gpus_per_node": 8,
        "stage": 3,
        "seq_len": row["seq_len"],
        "micro_batch": row["micro_batch"],
        "micro_batches": row["micro_batches"],
        "reduce_dtype": reduce_dtype or row["reduce_dtype"],
        "logit_bytes": LOSS_LOGIT_BYTES[row["loss"]],
        **options,
    }
    layer = row["checkpointing"] == "layer"
    return [
        predict_step(row["model"], hardware, activation_checkpointing=ac, **run)
        for ac in (("full", "matmul_inputs") if layer else (row["checkpointing"],))
    ]


def predict_tokens(row: dict, hardware=None, reduce_dtype: str | None = None) -> float:
    """Tokens per second per GPU of the row's run (row_steps); "layer" checkpointing (every
    second block: torchtitan's "selective layer") as the mean of the step with every block
    recomputed and with none recomputed (priced as "matmul_inputs", whose elementwise
    recomputation the model counts as free: the time of none, in the memory that fits).
    Raises ValueError where the step would not fit."""
    steps = row_steps(row, hardware, reduce_dtype)
    tokens = row["micro_batches"] * row["micro_batch"] * row["seq_len"]
    return tokens / (sum(p.step_s for p in steps) / len(steps))


def margin_ceiling(rows=None) -> tuple[float, str]:
    """The largest allocator margin with which every published training run still fits as the
    model prices it (a run that ran did fit), and the run that sets it: (margin, row id)."""
    ceilings = []
    for row in rows or [r for r in ROWS if r["kind"] == "tokens"]:
        hardware = HARDWARE[row["hardware"]]
        steps = row_steps(row, allocator_margin=0.0, allow_oom=True)
        peak = max(p.peak_memory_bytes for p in steps)
        ceilings.append((hardware.memory_bytes / peak - 1, row["id"]))
    return min(ceilings)


def predict(row: dict, hardware=None) -> float:
    return (predict_busbw if row["kind"] == "busbw" else predict_tokens)(row, hardware)


def fit_elementwise_bytes(row: dict | None = None, steps: int = 60) -> float:
    """The elementwise bytes per hidden unit that make the fitted row's prediction its
    published throughput (bisection: the prediction falls as the bytes grow)."""
    row = row or next(r for r in ROWS if r["fitted"])
    hardware, low, high = HARDWARE[row["hardware"]], 0.0, 10_000.0
    for _ in range(steps):
        mid = (low + high) / 2
        fast = predict(row, hardware.with_(elementwise_bytes=mid)) > row["published"]
        low, high = (mid, high) if fast else (low, mid)
    return (low + high) / 2


def predict_all() -> list[dict]:
    """Every row with its prediction and predicted / published."""
    out = []
    for row in ROWS:
        predicted = predict(row)
        shown = {k: v for k, v in row.items() if k != "model"}
        if "model" in row:
            shown["model"] = row["model"].name
        out.append(
            {**shown, "predicted": predicted, "ratio": predicted / row["published"]}
        )
    return out
