"""Collectives priced as NCCL runs them: its algorithms, protocols and choice by size (its
JavaScript twin: collectiveSeconds in zerobook/assets/perfmodel.js, compared to the bit).

    collective_seconds("all_gather", 2**29, world_size=64, gpus_per_node=8,
                       hardware=H100_NODE)
    nccl_choice("all_reduce", 2**30, world_size=16, gpus_per_node=8,
                hardware=A100_NODE)  # -> ("ring", "Simple", seconds)

A group of N ranks, k of them in each node (8 for whole nodes, 1 for HSDP's
replicas), N/k nodes. Ring (every collective): NCCL runs one ring per channel and
each channel leaves the node through its own NIC (its GPU's rail), so the bytes split
over the links as `link_bytes` counts them: a GPU sends V = (N-1)/N S (twice that for
an all-reduce); beyond one node 1/k of it through the NICs its rank owns, the rest
over NVLink. The time is the slower link's bytes over its bandwidth. Tree
(all-reduce): NCCL's double binary tree, 0.92 of the ring's bus bandwidth at half its
algorithm bandwidth, log2(nodes) network latencies instead of 2(N-1). NVLS
(hardware.nvls, one node): the NVSwitch reduces; each GPU sends and receives
S (k+1)/k, at NCCL's NVLS efficiency. NVLS tree (several nodes): NVLS inside, a tree
across, the node's egress carrying 2S. CollNet (hardware.sharp): the network's
switches reduce, the node's egress carries S once.

Latencies, protocol factors (LL, LL128, Simple), the tree's correction by size and
the ring's plateau are NCCL's own tuning model (src/graph/tuning.cc:
ncclTopoTuneModel, ncclTopoGetAlgoTime), and NCCL runs the fastest candidate, as
`nccl_choice` does. Assumed, not read from a system: 16 channels (the plateau rule),
LL128 enabled, no extra network latency (the IB plugin reports 0), the DGX's CPU
(H100: Intel, A100: AMD) for the host constants. Left out: PAT (one GPU per node,
all-gather and reduce-scatter), NVLS for all-gather and reduce-scatter (a GPU must
receive (N-1)/N S either way), per-channel bandwidth caps.
"""

from __future__ import annotations

import functools
import math

KINDS = ("all_reduce", "all_gather", "reduce_scatter")
PROTOCOLS = ("LL", "LL128", "Simple")
US = 1e-6
# fmt: off
# ncclTunerConstantsDefaults, microseconds: base latency; per hop over NVLink, network
BASE_LATENCY = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
HW_LATENCY = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4),
               "collnet": (0, 0, 3.7), "nvls": (0, 0, 25.0), "nvls_tree": (0, 0, 25.0)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet": (0, 0, 31.0),
            "nvls": (0, 0, 18.0), "nvls_tree": (0, 0, 20.9)},
}
# LL's bus bandwidth cap, GB/s: one node by GPU; 2 nodes, more nodes by the host CPU
LL_MAX = {"ampere": (87.7, 22.5, 19.0), "hopper": (141.0, 39.0, 20.4)}
NET_OVERHEAD = {"ampere": 2.0, "hopper": 1.0}  # us per network step: AMD, Intel hosts
NVLS_EFFICIENCY = {"ampere": 0.0, "hopper": 0.85}
CHANNELS = 16  # assumed, for the ring's plateau rule
TREE_CORRECTION = (  # by protocol, by log2(bytes / 64): 64 B to 256 MB
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
     1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
     .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8,
     .9, .9, .9),
)
# fmt: on


def check(kind, size_bytes, world_size, gpus_per_node, node_gpus=None) -> None:
    """Clear errors for what cannot be priced."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not (
        isinstance(size_bytes, (int, float))
        and math.isfinite(size_bytes)
        and size_bytes >= 0
    ):
        raise ValueError(f"size_bytes must be a finite number >= 0, got {size_bytes!r}")
    for name, value in (("world_size", world_size), ("gpus_per_node", gpus_per_node)):
        if not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if world_size > gpus_per_node and world_size % gpus_per_node:
        raise ValueError(
            f"world_size {world_size} is not a multiple of gpus_per_node {gpus_per_node}"
        )
    if node_gpus is not None and gpus_per_node > node_gpus:
        raise ValueError(
            f"gpus_per_node {gpus_per_node} is more than the node's {node_gpus} GPUs"
        )


def link_bytes(
    kind: str,
    size_bytes: float,
    *,
    world_size: int,
    gpus_per_node: int,
    nics_per_gpu: float = 1.0,
) -> dict:
    """A ring's bytes on each link: {"nvlink": one GPU sends, "nic": one NIC sends}."""
    check(kind, size_bytes, world_size, gpus_per_node)
    n, k = world_size, min(world_size, gpus_per_node)
    sent = (2 if kind == "all_reduce" else 1) * (n - 1) / n * size_bytes
    if n == k:
        return {"nvlink": sent, "nic": 0.0}
    return {"nvlink": (1 - 1 / k) * sent, "nic": sent / (k * nics_per_gpu)}


def ring_seconds(kind, size_bytes, world_size, gpus_per_node, hardware) -> float:
    """A ring's bandwidth term (Simple): the slower link's bytes over its bandwidth."""
    nics_per_gpu = hardware.nics_per_node / hardware.gpus_per_node
    sent = link_bytes(
        kind,
        size_bytes,
        world_size=world_size,
        gpus_per_node=gpus_per_node,
        nics_per_gpu=nics_per_gpu,
    )
    return max(
        sent["nvlink"] / hardware.intra_bandwidth, sent["nic"] / hardware.nic_bandwidth
    )


def bus_bandwidth(world_size: int, gpus_per_node: int, hardware) -> float:
    """A large ring's bus bandwidth per GPU (nccl-tests' busbw): V over its seconds."""
    if world_size == 1:
        return math.inf
    return (
        (world_size - 1)
        / world_size
        / ring_seconds("all_gather", 1.0, world_size, gpus_per_node, hardware)
    )


def floor_log2(value: float) -> int:
    """floor(log2(value)) for value >= 1, counted exactly (-1 below 1)."""
    bits = -1
    while value >= 1:
        value, bits = value // 2, bits + 1
    return bits


def ring(kind, size, n, k, hw, p) -> float:
    """NCCL's ring, protocol p (0 LL, 1 LL128, 2 Simple): latency, then bytes."""
    nodes, gen = n // k, hw.generation
    nsteps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    inter = 0 if nodes == 1 else 2 * (nodes - 1) if kind == "all_reduce" else nodes - 1
    overhead = 0.0 if nodes == 1 else NET_OVERHEAD[gen] * (3 if p == 2 else 1)
    intra_lat = max(HW_LATENCY["nvlink"]["ring"][p], overhead)
    inter_lat = HW_LATENCY["net"]["tree" if k == 1 else "ring"][p]
    lat = BASE_LATENCY["ring"][p] + (nsteps - inter) * intra_lat + inter * inter_lat
    if p == 2 and nodes > 1 and kind == "all_reduce" and size / (CHANNELS * n) >= 64:
        lat *= 1.4  # the ring's plateau (tuning.cc)
    seconds = ring_seconds(kind, size, n, k, hw)
    if p == 1:
        seconds /= 0.92
    elif p == 0:
        bus = (2 if kind == "all_reduce" else 1) * (n - 1) / n * size / seconds
        seconds *= bus / min(LL_MAX[gen][min(nodes, 3) - 1] * 1e9, 0.5 * bus)
    return lat * US + seconds


def tree(size, n, k, hw, p) -> float:
    """NCCL's tree all-reduce: chains in the node, a double binary tree across nodes."""
    nodes, gen = n // k, hw.generation
    bus = 0.92 * 2 * (n - 1) / n * size / ring_seconds("all_reduce", size, n, k, hw)
    if p == 0:
        bus = min(bus / 3.8, LL_MAX[gen][min(nodes, 3) - 1] * 1e9)
    elif p == 1:
        bus *= 7 / 9 if nodes == 1 else 120 / 128
    log_size = floor_log2(size // 64)
    if 0 <= log_size < 23:
        bus *= TREE_CORRECTION[p][log_size]
    inter_lat = HW_LATENCY["net"]["tree"][p]
    lat = BASE_LATENCY["tree"][p] + 2 * (
        (k - 1) * HW_LATENCY["nvlink"]["tree"][p] + floor_log2(nodes) * inter_lat
    )
    return lat * US + size / (0.5 * bus)


def in_network(size, n, k, hw) -> list:
    """NVLS, NVLS tree and CollNet all-reduces, where the hardware has them."""
    nodes, out = n // k, []
    nvls = NVLS_EFFICIENCY[hw.generation] * hw.intra_bandwidth * k / (k + 1)
    egress = k * hw.nics_per_node / hw.gpus_per_node * hw.nic_bandwidth
    if hw.nvls and k > 1 and nodes == 1:
        out.append(("nvls", HW_LATENCY["nvlink"]["nvls"][2] * US + size / nvls))
    if hw.nvls and k > 1 and nodes > 1:
        lat = (
            HW_LATENCY["nvlink"]["nvls_tree"][2]
            + 2 * floor_log2(nodes) * HW_LATENCY["net"]["nvls_tree"][2]
        )
        out.append(("nvls_tree", lat * US + size / min(nvls, egress / 2)))
    if hw.sharp and nodes > 1:
        inside = (
            nvls
            if hw.nvls and k > 1
            else hw.intra_bandwidth * k / (2 * (k - 1))
            if k > 1
            else math.inf
        )
        lat = (
            2 * (min(1, k - 1) * HW_LATENCY["nvlink"]["collnet"][2] + (k - 1) * 0.4)
            + HW_LATENCY["net"]["collnet"][2]
        )
        out.append(("collnet", lat * US + size / min(inside, egress)))
    return out


# a step prices the same few collectives in every layer: each is computed once
@functools.lru_cache(maxsize=65_536, typed=True)
def nccl_choice(
    kind: str, size_bytes: float, *, world_size: int, gpus_per_node: int, hardware
) -> tuple:
    """(algorithm, protocol, seconds): the fastest candidate, as NCCL's tuner picks (a pure
    function of its arguments, so remembered: `hardware` is a frozen dataclass)."""
    check(kind, size_bytes, world_size, gpus_per_node, hardware.gpus_per_node)
    n, k = world_size, min(world_size, gpus_per_node)
    if n == 1 or size_bytes == 0:
        return ("none", "none", 0.0)
    if hardware.generation is None:  # a calibrated host: an alpha-beta ring
        one_node = n == k
        alpha = hardware.intra_alpha if one_node else hardware.inter_alpha
        bandwidth = (
            hardware.intra_bandwidth if one_node else bus_bandwidth(n, k, hardware)
        )
        steps = 2 if kind == "all_reduce" else 1
        return (
            "ring",
            "alpha-beta",
            steps * ((n - 1) * alpha + (n - 1) / n * size_bytes / bandwidth),
        )
    options = [
        ("ring", PROTOCOLS[p], ring(kind, size_bytes, n, k, hardware, p))
        for p in range(3)
    ]
    if kind == "all_reduce":
        options += [
            ("tree", PROTOCOLS[p], tree(size_bytes, n, k, hardware, p))
            for p in range(3)
        ]
        options += [
            (name, "Simple", s) for name, s in in_network(size_bytes, n, k, hardware)
        ]
    return min(options, key=lambda option: option[2])


def collective_seconds(
    kind: str, size_bytes: float, *, world_size: int, gpus_per_node: int, hardware
) -> float:
    """Seconds of an all-reduce, all-gather or reduce-scatter of a `size_bytes` buffer
    (the whole buffer, nccl-tests' convention) over `world_size` ranks, `gpus_per_node`
    of them in each node, on `hardware`, by the algorithm and protocol NCCL picks."""
    return nccl_choice(
        kind,
        size_bytes,
        world_size=world_size,
        gpus_per_node=gpus_per_node,
        hardware=hardware,
    )[2]
