"""The tables of "Collectives as NCCL runs them" (chapters/nccl_collectives): a large ring's bus
bandwidth per layout, and the algorithm and protocol NCCL's tuning model picks by size and scale.
Notebook side.

    bus_table((H100_NODE, A100_NODE))
    choice_table([(H100_NODE, 8), (H100_NODE, 64)], sizes=[2**20, 2**30])
"""

from __future__ import annotations

from zerobook.figures.nccl import bus_gbps, size_label
from zerobook.figures.widgets import html_table
from zerobook.perfmodel.collectives import bus_bandwidth, nccl_choice

# (label, world_size, GPUs of the group in each node)
GROUPS = (("one node", 8, 8), ("whole nodes", 64, 8), ("one per node", 8, 1))


def gpu_name(hardware) -> str:
    """ "H100 SXM" of "H100 SXM, 8 per node, ..."."""
    return hardware.name.split(",")[0]


def bus_table(hardwares, groups=GROUPS):
    """HTML: a large ring's busbw per GPU, B_bus = min(B_NVLink / (1 - 1/k), k B_NIC)."""
    rows = [
        (gpu_name(hw), label, f"{bus_bandwidth(n, k, hw) / 1e9:.1f}")
        for hw in hardwares
        for label, n, k in groups
    ]
    return html_table(
        ["GPUs", "group", "bus bandwidth GB/s"],
        rows,
        caption="A large ring's busbw per GPU (predicted)",
    )


def choices(hardware, world_size: int, sizes, gpus_per_node: int = 8) -> list[tuple]:
    """NCCL's (algorithm, protocol, seconds) for an all-reduce of each size."""
    return [
        nccl_choice(
            "all_reduce",
            s,
            world_size=world_size,
            gpus_per_node=gpus_per_node,
            hardware=hardware,
        )
        for s in sizes
    ]


def choice_table(scales, sizes):
    """HTML: for each (hardware, world_size) of `scales`, NCCL's pick at each size and the
    busbw it gives."""
    rows = [
        (
            f"{gpu_name(hw)} x {n:,}",
            *(
                f"{a} {p}: {bus_gbps(s, t, n):.0f}"
                for (a, p, t), s in zip(choices(hw, n, sizes), sizes)
            ),
        )
        for hw, n in scales
    ]
    return html_table(
        ["all-reduce", *(size_label(s) for s in sizes)],
        rows,
        caption="NCCL's choice (algorithm, protocol) and the busbw it gives, GB/s",
    )
