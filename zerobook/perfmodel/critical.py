"""T*: the tokens per GPU per step whose computation lasts as long as ZeRO-3's collectives (with
HSDP, gradient accumulation, or ZeRO++'s parts): above it they can hide behind it.

    critical_tokens_per_gpu(H100_NODE, world_size=64, gpus_per_node=8)  # ~2,000
    critical_tokens_per_gpu(H100_NODE, world_size=64, gpus_per_node=8, zeropp=("qwZ", "hpZ"))

Per parameter, 6 T FLOPs at the sustained rate against the bytes each collective sends at its
bus bandwidth (collectives.bus_bandwidth): Psi cancels.
"""

from __future__ import annotations

from zerobook.perfmodel.collectives import bus_bandwidth, check
from zerobook.perfmodel.zeropp import QGZ_BYTES, QWZ_BYTES, quantize_seconds
from zerobook.perfmodel.zeropp import check as zeropp_parts


def critical_tokens_per_gpu(
    hardware,
    *,
    world_size: int,
    gpus_per_node: int,
    shard_group: int | None = None,
    element_bytes: int = 2,
    reduce_bytes: int | None = None,
    micro_batches: int = 1,
    zeropp=(),
    quantizer: str = "unfused",
) -> float:
    """T*: tokens per GPU per step above which ZeRO-3's collectives can hide behind its
    computation. Per parameter, 6 T FLOPs at the sustained rate against the ring's bytes
    at the bus bandwidth: two all-gathers (`element_bytes` each) and a reduce-scatter
    (`reduce_bytes`, None: the same) over the shard group and (HSDP, a shard_group) an
    all-reduce of each 1/G shard over the N/G replicas: beside them when the shard group is
    inside a node (NVLink and the NICs at once, as FSDP2 streams them: the longer sets T*),
    after them when both cross the NICs. Ψ cancels. With `micro_batches` k, every micro-batch
    gathers again and the last (or every one) reduces: each must hide its own, so a step
    needs k times one micro-batch's T*. `zeropp` (ZeRO++'s parts, DeepSpeed's layout: the shard
    group is every GPU): qwZ gathers QWZ_BYTES an element in both gathers (backward's too, with
    hpZ or without, as DeepSpeed does) and pays its quantize and dequantize passes on the gathers'
    stream (`quantizer`: zeropp.QUANTIZERS, "unfused" as measured), hpZ's backward gather is a
    ring inside the node, qgZ's reduction its two all-to-alls of QGZ_BYTES, inside the node and
    then a g-th across through the GPU's share of the NICs; one after the other, as the step
    model runs ZeRO++'s collectives on one stream. Latencies are left out (as for ZeRO-3's): a
    bound where units are small."""
    group, reduce_bytes = shard_group or world_size, reduce_bytes or element_bytes
    parts = zeropp_parts(zeropp, 3)
    if parts and group != world_size:
        raise ValueError(
            "ZeRO++ shards over every GPU: leave shard_group out with zeropp"
        )
    check("all_gather", 0, group, min(group, gpus_per_node), hardware.gpus_per_node)
    if world_size % group or (group < gpus_per_node and gpus_per_node % group):
        raise ValueError(
            f"shard_group {group} must divide world_size {world_size} and fit the nodes"
        )
    if not (isinstance(micro_batches, int) and micro_batches >= 1):
        raise ValueError(
            f"micro_batches must be a positive integer, got {micro_batches!r}"
        )
    if parts:
        seconds = sum(zeropp_seconds(parts, world_size, gpus_per_node, element_bytes,
                                     reduce_bytes, hardware, quantizer))  # fmt: skip
        return micro_batches * hardware.peak_flops * hardware.sustained * seconds / 6
    sent = 2 * element_bytes + reduce_bytes  # bytes per parameter per micro-batch
    inside = (
        sent
        * (group - 1)
        / group
        / bus_bandwidth(group, min(group, gpus_per_node), hardware)
    )
    replicas, across = world_size // group, 0.0
    if replicas > 1:
        per_node = max(1, gpus_per_node // group)
        across = (
            2 * reduce_bytes * (replicas - 1) / replicas / group
            / bus_bandwidth(replicas, per_node, hardware)
        )  # fmt: skip
    seconds = max(inside, across) if group <= gpus_per_node else inside + across
    return micro_batches * hardware.peak_flops * hardware.sustained * seconds / 6


def zeropp_seconds(parts, world_size, gpus_per_node, element_bytes, reduce_bytes, hw,
                   quantizer="unfused"):  # fmt: skip
    """Seconds per parameter of one micro-batch's ZeRO-3 collectives with ZeRO++'s `parts`, as
    (forward's all-gather, backward's, the gradients' reduction); qwZ's gathers with their
    quantize and dequantize passes (zeropp.quantize_seconds)."""
    n, g = world_size, min(world_size, gpus_per_node)
    ring = lambda each, size, k: each * (size - 1) / size / bus_bandwidth(size, k, hw)  # noqa: E731

    def gather(size, k):  # a weights' all-gather over `size` ranks, k a node
        if "qwZ" not in parts:
            return ring(element_bytes, size, k)
        return ring(QWZ_BYTES, size, k) + quantize_seconds(1.0, size, hw, quantizer)

    forward = gather(n, g)
    backward = gather(g, g) if "hpZ" in parts else forward
    if "qgZ" in parts:
        nodes, nics = n // g, hw.nic_bandwidth * hw.nics_per_node / hw.gpus_per_node
        reduce = QGZ_BYTES * (g - 1) / g / hw.intra_bandwidth
        reduce += QGZ_BYTES / g * (nodes - 1) / nodes / nics
    else:
        reduce = ring(reduce_bytes, n, g)
    return forward, backward, reduce
