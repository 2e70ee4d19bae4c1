"""Accelerator and cluster facts the book uses, with their sources. FLOP/s, bytes,
bytes/s, seconds.

    H100_NODE.peak_flops      # 989.4e12: dense BF16, per GPU (the datasheet)
    H100_NODE.sustained       # 0.80: bf16 matmul measured here, over the datasheet
    H100_NODE.nic_bandwidth   # 47e9: one 400 Gb/s NIC as NCCL carries it; eight per node

A node is described as it is: each GPU's NVLink bandwidth per direction, the node's NICs
and each NIC's bandwidth, and whether the switches reduce in the network (NVLS inside
the node, SHARP across nodes). How a collective uses them:
zerobook.perfmodel.collectives.

NVLink: NVIDIA quotes the sum of both directions (900 GB/s for H100, 600 for A100); the
line rate per direction is half. NCCL's topology counts what its protocol carries over
each link (20.6 GB/s per NVLink 4 link, 18 links; 20.0 per NVLink 3 link, 12 links:
src/graph/topo.h), about 0.8 of the line rate, as its maintainers say ("450GB/s is the
line rate. With the protocol overhead (~20%) NCCL can get an effective NVLink bandwidth
of 370GB/s", NVIDIA/nccl-tests#212): the figure a ring's time depends on, and the
presets'. A NIC likewise carries less than its line rate, by NVIDIA's figures: "For NDR @
400Gbps you should see 46-48GB/s per NIC" (NVIDIA/nccl-tests#290), "24GB/s is the peak
performance per 200G NIC" (NVIDIA/nccl-tests#119); the presets take 47 and 24 GB/s.
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
# NVIDIA H200 SXM (NVIDIA H200 Tensor Core GPU datasheet): the H100's GH100 chip, with the same
# tensor-core figures, and 141 GB of HBM3e (4.8 TB/s against the H100's 3.35).
H200_SXM = dict(H100_SXM, memory_bytes=141e9)
DATASHEETS = {"H100": H100_SXM, "H200": H200_SXM}
NCCL_NVLINK = {"hopper": (18, 20.6 * GB), "ampere": (12, 20.0 * GB)}  # links, bytes/s
# one NIC as NCCL carries it (NVIDIA's figures, above): 400 Gb/s NDR (line 50 GB/s), 200 Gb/s HDR (25)
NCCL_NIC = {"hopper": 47 * GB, "ampere": 24 * GB}
GENERATIONS = ("ampere", "hopper")
ROOFLINE = "the roofline: every kernel at the datasheet's peak (a bound)"
# A fitted overhead (Hardware.elementwise_bytes), not a byte count, fitted on one published
# run and on no other (benchmarks/perfmodel_published.py refits it): MPT-7B on 8 A100s,
# 2,048 tokens per sequence, 2 micro-batches of 6, gradients reduced in fp32, no recomputation,
# 4,641 tokens/s per GPU (MosaicML).
ELEMENTWISE_BYTES = 286.0


@dataclass(frozen=True)
class Hardware:
    """One kind of GPU in nodes of `gpus_per_node`, as a step-time model needs it.

    intra_bandwidth: one GPU's NVLink, one direction, as NCCL carries it. nics_per_node
    NICs of nic_bandwidth each (one direction). nvls: NVLink SHARP (the NVSwitch reduces
    an all-reduce inside the node); sharp: the network's switches reduce across nodes
    (NCCL's CollNet). generation: which of NCCL's tuning constants apply ("ampere",
    "hopper"), or None for a host priced by a calibrated alpha-beta ring (intra_alpha,
    inter_alpha: seconds per ring step). sustained: the fraction of `peak_flops` the
    step's matrix multiplies sustain, with its source (1.0 is the roofline: a bound, not
    a prediction). elementwise_bytes: a fitted overhead, not a count of bytes: whatever a
    block's forward costs beyond its matmuls at the sustained rate (norms, activations,
    residuals, softmax, attention kernels slower than the matmul rate, launches, the
    framework), priced as bytes per hidden unit per token at HBM bandwidth (backward:
    twice); fitted once on one published run, ELEMENTWISE_BYTES.
    overlap: whether communication runs beside computation (GPUs) or takes the same
    cores (a CPU host). reduce_scatter: None prices a reduce-scatter as its own
    collective; a number, as that multiple of an all-reduce's time (gloo's
    reduce-scatter is an all-reduce and copies: a "this machine" preset takes the ratio
    it measured)."""

    name: str
    peak_flops: float
    memory_bytes: float
    memory_bandwidth: float
    intra_bandwidth: float
    nic_bandwidth: float
    nics_per_node: int
    gpus_per_node: int = 8
    nvls: bool = False
    sharp: bool = False
    generation: str | None = "hopper"
    intra_alpha: float = 0.0
    inter_alpha: float = 0.0
    sustained: float = 1.0
    sustained_source: str = ROOFLINE
    elementwise_bytes: float = 0.0
    overlap: bool = True
    reduce_scatter: float | None = None
    source: str = ""

    def __post_init__(self):
        if self.generation is not None and self.generation not in GENERATIONS:
            raise ValueError(
                f"generation must be one of {GENERATIONS} or None, got {self.generation!r}"
            )
        if not 0 < self.sustained <= 1:
            raise ValueError(f"sustained must be in (0, 1], got {self.sustained!r}")

    def with_(self, **changes) -> Hardware:
        return replace(self, **changes)

    def roofline(self) -> Hardware:
        """This hardware with every kernel at the datasheet's peak: a bound on MFU."""
        return replace(
            self,
            name=self.name + " (roofline)",
            sustained=1.0,
            elementwise_bytes=0.0,
            sustained_source=ROOFLINE,
        )


def datasheet(device: str) -> dict | None:
    """The datasheet of a GPU named as torch.cuda.get_device_name names it ("NVIDIA H200",
    "NVIDIA H100 80GB HBM3"), or None for one not in DATASHEETS."""
    return next((sheet for name, sheet in DATASHEETS.items() if name in device), None)


def nccl_nvlink(generation: str) -> float:
    """One GPU's NVLink per direction as NCCL's topology counts it: links x per link."""
    links, per_link = NCCL_NVLINK[generation]
    return links * per_link


H100_NODE = Hardware(
    "H100 SXM, 8 per node, NVLink 4 + NVSwitch (NVLS), 8 x 400 Gb/s InfiniBand",
    peak_flops=H100_SXM["bf16_dense"],
    memory_bytes=80e9,
    memory_bandwidth=3.35e12,
    intra_bandwidth=nccl_nvlink("hopper"),
    nic_bandwidth=NCCL_NIC["hopper"],
    nics_per_node=8,
    nvls=True,
    generation="hopper",
    sustained=0.80,
    sustained_source="bf16 matmul measured by `make gpu-check` on an H100 SXM: 791.2 of "
    "989.4 TFLOP/s "
    "(benchmarks/results/gpu_h100_2026-11-23.md); ml-engineering's MAMF table: 80.3%",
    elementwise_bytes=ELEMENTWISE_BYTES,
    source="NVIDIA H100 datasheet (BF16 dense, 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s "
    "both ways); NCCL src/graph/topo.h (18 x 20.6 GB/s); DGX H100: eight ConnectX-7 "
    "400 Gb/s, one per GPU, 47 GB/s each as NCCL carries it (nccl-tests#290)",
)
A100_NODE = Hardware(
    "A100 80 GB SXM, 8 per node, NVLink 3, 8 x 200 Gb/s InfiniBand",
    peak_flops=312 * TFLOPS,
    memory_bytes=80e9,
    memory_bandwidth=2.039e12,
    intra_bandwidth=nccl_nvlink("ampere"),
    nic_bandwidth=NCCL_NIC["ampere"],
    nics_per_node=8,
    generation="ampere",
    sustained=0.869,
    sustained_source="bf16 matmul, 271.2 of 312 TFLOP/s: the Maximum Achievable Matmul "
    "FLOPS table "
    "of Bekman's Machine Learning Engineering (A100 SXM, torch 2.6)",
    elementwise_bytes=ELEMENTWISE_BYTES,
    source="NVIDIA A100 datasheet (BF16 dense 312 TFLOPS, 80 GB HBM2e at 2,039 GB/s, "
    "NVLink 600 GB/s both ways); NCCL src/graph/topo.h (12 x 20.0 GB/s); DGX A100: eight "
    "ConnectX-6 200 Gb/s, one per GPU, 24 GB/s each (nccl-tests#119)",
)
PRESETS = {"H100": H100_NODE, "A100": A100_NODE}
