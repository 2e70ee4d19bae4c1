"""ZeRO++ (Wang et al., 2023) priced as DeepSpeed runs it: three changes to ZeRO-3's traffic.

qwZ (`zero_quantized_weights`): every weights' all-gather sends int8 weights, symmetric, one scale
per group of about 8,000 elements (deepspeed/runtime/zero/partition_parameters.py, CUDAQuantizer:
`target_group_size = 8000`, 8 bits): QWZ_BYTES per element instead of 2. Each rank quantizes its
piece before the gather and dequantizes the whole unit after it, both on the gathers' stream
(`all_gather_coalesced` and `AllGatherCoalescedHandle.wait`, called under
`get_accelerator().stream(self.__allgather_stream)` in partitioned_param_coordinator.py): the
passes lengthen each gather (`quantize_seconds`), priced by QUANTIZERS. (They also take memory
bandwidth from the computation running beside them: not modelled.)
hpZ (`zero_hpz_partition_size`, a node's GPUs): after forward each GPU keeps a secondary shard of
the 16-bit weights, 1/G of them for a group of G inside the node (`_partition_param_sec`, in the
parameter's dtype), and backward's all-gather reads those: over NVLink only, and 2 Psi / G more
bytes held. With qwZ that gather is quantized too: the coordinator passes
`quantize=self.zero_quantized_weights` for every fetch, forward's and backward's
(`__all_gather_params`), and `_all_gather_coalesced`'s quantize branch concatenates the
`ds_secondary_tensor`s and quantizes them (DeepSpeed 0.19.6): QWZ_BYTES an element in the node.
qgZ (`zero_quantized_gradients`): the reduce-scatter becomes two all-to-alls of int4 gradients
(deepspeed/runtime/comm/coalesced_collectives.py, all_to_all_quant_reduce, 4 bits): inside the
node, each GPU sends (g-1)/g of its unit's gradient to its peers; the node's sums, a g-th each,
then go to the same-rank GPU of every other node. QGZ_BYTES per element and all-to-all: int4
and an fp32 scale per group (DeepSpeed's groups are max(rows, columns, N) of a tensor, a few
thousand elements: priced at QUANT_GROUP).

An all-to-all is priced as its sends at the slower link's bandwidth, plus one Simple ring step's
latency per peer (NCCL runs it as grouped sends and receives; its tuner has no model of it): an
assumption, not NCCL's own figure. qgZ's quantization kernels are not priced.
"""

from __future__ import annotations

from zerobook.perfmodel.collectives import BASE_LATENCY, HW_LATENCY, US

QUANT_GROUP = 8000  # elements per int8 scale (CUDAQuantizer.target_group_size)
QWZ_BYTES = 1 + 4 / QUANT_GROUP  # int8 and an fp32 scale per group
QGZ_BYTES = 0.5 + 4 / QUANT_GROUP  # int4 and an fp32 scale per group
OPTIONS = ("qwZ", "hpZ", "qgZ")

# qwZ's two passes, as bytes of HBM traffic an element (quantize: per element of the rank's
# piece; dequantize: per element of the unit), so that a GPU's memory bandwidth prices them:
# - "unfused": the course's quantizer (zerobook.zero.quantized, a padded copy, block maxima, a
#   division, a rounding, a cast: several kernels), measured by `make gpu-check` on an NVIDIA
#   H200 (benchmarks/results/gpu_h200_2026-11-29.json, "quantize": 19.43 ps and 7.62 ps an
#   element of a 64M-element bf16 tensor) times the H200's 4.8 TB/s (its datasheet). Scaling to
#   another GPU by its memory bandwidth assumes the passes are bound by it (elementwise work).
# - "fused": DeepSpeed's CUDAQuantizer, one kernel each way (csrc/quantization/quantize.cu,
#   dequantize.cu), after a cast of bf16 weights to fp16 and before one back (its quantize:
#   `param.to(dtype=torch.half)`, its dequantize: `.to(dtype)`): 2 + 2 read and written by the
#   cast, 2 + 1 by the kernel; 1 + 2 and 2 + 2 back. At the full memory bandwidth: a bound, not
#   measured here.
# - "none": the passes free, bytes only (the model before issue 68: a lower bound).
MEASURED_H200 = {"quantize": 1.942799985405803e-11, "dequantize": 7.615044713058255e-12}
H200_MEMORY_BANDWIDTH = 4.8e12  # bytes/s, NVIDIA H200 SXM datasheet
QUANTIZERS = {
    "unfused": tuple(MEASURED_H200[k] * H200_MEMORY_BANDWIDTH for k in MEASURED_H200),
    "fused": (7.0, 7.0),
    "none": (0.0, 0.0),
}


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


def pass_seconds(hardware, quantizer: str = "unfused") -> tuple[float, float]:
    """qwZ's (quantize, dequantize) seconds per element on `hardware` (QUANTIZERS)."""
    if quantizer not in QUANTIZERS:
        raise ValueError(
            f"quantizer must be one of {sorted(QUANTIZERS)}, got {quantizer!r}"
        )
    return tuple(b / hardware.memory_bandwidth for b in QUANTIZERS[quantizer])


def quantize_seconds(params: float, ranks: int, hardware, quantizer="unfused") -> float:
    """The passes of one qwZ gather of a unit of `params` over `ranks`: quantize the rank's
    1/ranks, dequantize the whole unit (both on the gathers' stream, before and after it)."""
    quantize, dequantize = pass_seconds(hardware, quantizer)
    return params / ranks * quantize + params * dequantize


def break_even_bandwidth(ranks: int, hardware, quantizer="unfused", element_bytes=2):
    """The bandwidth (bytes/s) at which each GPU receives in a ring all-gather over `ranks`
    (collectives.bus_bandwidth) below which qwZ's gather ends sooner than the 16-bit one: the
    link time of the (ranks-1)/ranks bytes saved an element against the passes' time."""
    saved = (ranks - 1) / ranks * (element_bytes - QWZ_BYTES)
    spent = quantize_seconds(1.0, ranks, hardware, quantizer)
    return float("inf") if spent == 0 else saved / spent


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
