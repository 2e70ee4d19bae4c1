"""Accelerator and cluster facts the book uses, with their sources. FLOP/s, bytes, bytes/s, seconds.

    H100_NODE.peak_flops         # 989.4e12: dense BF16, per GPU
    H100_NODE.inter_bandwidth    # 50e9: one 400 Gb/s NIC per GPU, one direction

Bandwidths are per GPU and per direction (what one GPU can send while it receives as much), the
figure a ring collective's time depends on. NVIDIA quotes NVLink as the sum of both directions
(900 GB/s for H100): half of it is the per-direction figure. Latencies (alpha, seconds per ring
step) are not on a datasheet: the values below are assumptions of the right order (NVLink a few
microseconds per hop, InfiniBand somewhat more), stated as such; they matter only for small
messages.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

TFLOPS = 1e12
GB = 1e9

# NVIDIA H100 SXM5, tensor-core peak throughput (NVIDIA H100 Tensor Core GPU datasheet). The
# datasheet's largest figure is FP8 *with 2:4 structured sparsity*; dense figures are half of the
# sparse ones, and BF16 is half of FP8.
H100_SXM = {
    "bf16_dense": 989.4 * TFLOPS,
    "bf16_sparse": 1978.9 * TFLOPS,
    "fp8_dense": 1978.9 * TFLOPS,
    "fp8_sparse": 3957.8 * TFLOPS,
    "tf32_dense": 494.7 * TFLOPS,  # the datasheet's 989 TF32 is with sparsity too
    "fp32": 66.9 * TFLOPS,  # no tensor cores
    "memory_bytes": 80e9,
}


@dataclass(frozen=True)
class Hardware:
    """One kind of GPU in nodes of `gpus_per_node`, as a step-time model needs it.

    sustained: the fraction of `peak_flops` a training step's kernels sustain (1.0: the roofline's
    bound; a measured or calibrated value otherwise). overlap: whether communication runs beside
    computation (GPUs: copy engines and NICs do it) or takes the same cores (a CPU host).
    reduce_scatter: a reduce-scatter's time over an all-reduce's of the same buffer: 0.5 for a ring
    (NCCL: (N-1)/N of the buffer per rank, half an all-reduce); gloo's is more than 1
    (ProcessGroupGloo.reduce_scatter_tensor_coalesced clones the input, all-reduces the whole of it
    and copies out this rank's chunk), so a "this machine" preset takes the ratio it measured."""

    name: str
    peak_flops: float
    memory_bytes: float
    memory_bandwidth: float
    intra_bandwidth: float
    inter_bandwidth: float
    intra_alpha: float
    inter_alpha: float
    gpus_per_node: int = 8
    sustained: float = 1.0
    overlap: bool = True
    reduce_scatter: float = 0.5
    source: str = ""

    def with_(self, **changes) -> "Hardware":
        return replace(self, **changes)


H100_NODE = Hardware(
    "H100 SXM, 8 per node, NVLink 4, 400 Gb/s InfiniBand per GPU",
    peak_flops=H100_SXM["bf16_dense"], memory_bytes=80e9, memory_bandwidth=3.35e12,
    intra_bandwidth=900 * GB / 2, inter_bandwidth=400e9 / 8, intra_alpha=3e-6, inter_alpha=8e-6,
    source="NVIDIA H100 Tensor Core GPU datasheet (BF16 dense, 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s); "
           "DGX H100: eight ConnectX-7 400 Gb/s ports, one per GPU")
A100_NODE = Hardware(
    "A100 80 GB SXM, 8 per node, NVLink 3, 200 Gb/s InfiniBand per GPU",
    peak_flops=312 * TFLOPS, memory_bytes=80e9, memory_bandwidth=2.039e12,
    intra_bandwidth=600 * GB / 2, inter_bandwidth=200e9 / 8, intra_alpha=3e-6, inter_alpha=8e-6,
    source="NVIDIA A100 Tensor Core GPU datasheet (BF16 dense 312 TFLOPS, 80 GB HBM2e at 2,039 GB/s, "
           "NVLink 600 GB/s); DGX A100: eight ConnectX-6 200 Gb/s ports, one per GPU")
PRESETS = {"H100": H100_NODE, "A100": A100_NODE}
