"""ZeRO++ (Wang et al., 2023) priced as DeepSpeed runs it: three changes to ZeRO-3's traffic.

qwZ (`zero_quantized_weights`): forward's all-gather sends int8 weights, symmetric, one scale per
group of about 8,000 elements (deepspeed/runtime/zero/partition_parameters.py, CUDAQuantizer:
`target_group_size = 8000`, 8 bits): QWZ_BYTES per element instead of 2.
hpZ (`zero_hpz_partition_size`, a node's GPUs): after forward each GPU keeps a secondary shard of
the 16-bit weights, 1/G of them for a group of G inside the node (`_partition_param_sec`, in the
parameter's dtype), and backward's all-gather reads those: over NVLink only, 2 bytes an element,
and 2 Psi / G more bytes held.
qgZ (`zero_quantized_gradients`): the reduce-scatter becomes two all-to-alls of int4 gradients
(deepspeed/runtime/comm/coalesced_collectives.py, all_to_all_quant_reduce, 4 bits): inside the
node, each GPU sends (g-1)/g of its unit's gradient to its peers; the node's sums, a g-th each,
then go to the same-rank GPU of every other node. QGZ_BYTES per element and all-to-all: int4
and an fp32 scale per group (DeepSpeed's groups are max(rows, columns, N) of a tensor, a few
thousand elements: priced at QUANT_GROUP).

An all-to-all is priced as its sends at the slower link's bandwidth, plus one Simple ring step's
latency per peer (NCCL runs it as grouped sends and receives; its tuner has no model of it): an
assumption, not NCCL's own figure. Quantization kernels are not priced.
"""

from __future__ import annotations

from zerobook.perfmodel.collectives import BASE_LATENCY, HW_LATENCY, US

QUANT_GROUP = 8000  # elements per int8 scale (CUDAQuantizer.target_group_size)
QWZ_BYTES = 1 + 4 / QUANT_GROUP  # int8 and an fp32 scale per group
QGZ_BYTES = 0.5 + 4 / QUANT_GROUP  # int4 and an fp32 scale per group
OPTIONS = ("qwZ", "hpZ", "qgZ")


def check(zeropp, stage: int) -> frozenset:
    """The ZeRO++ parts asked for, as a set; a clear error for others, or for stages 0-2."""
    parts = frozenset(zeropp or ())
    if not parts <= set(OPTIONS):
        raise ValueError(f"zeropp must name parts of {OPTIONS}, got {sorted(parts)}")
    if parts and stage != 3:
        raise ValueError(
            f"ZeRO++ changes ZeRO-3's collectives: stage must be 3, got {stage}"
        )
    return parts


def alltoall_seconds(size_bytes: float, peers: int, across: bool, hardware) -> float:
    """An all-to-all in which each GPU sends size_bytes / (peers + 1) to each of `peers` others:
    over NVLink inside a node, or (`across`) through the GPU's share of the node's NICs."""
    if peers == 0:
        return 0.0
    sent = size_bytes * peers / (peers + 1)
    if across:
        bandwidth = (
            hardware.nic_bandwidth * hardware.nics_per_node / hardware.gpus_per_node
        )
    else:
        bandwidth = hardware.intra_bandwidth
    if hardware.generation is None:  # a host calibrated by an alpha-beta ring
        step = hardware.inter_alpha if across else hardware.intra_alpha
    else:
        hop = HW_LATENCY["net" if across else "nvlink"]["ring"][2]
        step = (BASE_LATENCY["ring"][2] + hop) * US
    return peers * step + sent / bandwidth


def qgz_seconds(params: float, world_size: int, gpus_per_node: int, hardware) -> list:
    """qgZ's two all-to-alls for a unit of `params` gradients: [(what, seconds)]."""
    g = min(world_size, gpus_per_node)
    nodes = world_size // g
    size = params * QGZ_BYTES
    return [
        ("all-to-all (node)", alltoall_seconds(size, g - 1, False, hardware)),
        ("all-to-all (nodes)", alltoall_seconds(size / g, nodes - 1, True, hardware)),
    ]
