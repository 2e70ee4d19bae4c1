"""Charts of the chapters' numbers: memory per GPU against N, redundancy, traffic, the ring's
steps, measured bandwidth, gradient bytes held, model states against N (the old `zerobook.plots`:
that name still works). Axis labels carry units; the style is zerobook.figures.style.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from zerobook.accounting import memory

from zerobook.figures.style import PALETTE, STAGE_COLORS, reference_lines


def max_model_size_chart(
    devices_gb=(80, 32), world_sizes=tuple(2**k for k in range(11))
):
    """Largest model whose model states fit, vs GPUs: flat for DDP, linear for ZeRO-3."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for device_gb, style in zip(devices_gb, ("-", "--")):
        for stage in memory.STAGES:
            sizes = [
                memory.max_model_params(
                    device_gb * memory.GB, stage=stage, world_size=n
                )
                for n in world_sizes
            ]
            ax.plot(
                world_sizes,
                sizes,
                style,
                color=STAGE_COLORS[stage],
                marker="o",
                markersize=3,
                label=f"{memory.STAGE_NAMES[stage]}, {device_gb} GB",
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="GPUs (data-parallel degree N)",
        ylabel="largest model (parameters)",
        title="Model states only (16 bytes/parameter), no activations",
    )
    ax.set_xticks(world_sizes, [str(n) for n in world_sizes])
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(
        ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.15), frameon=False
    )  # below: no line there
    return fig


def redundancy_chart(num_params: float = 1e9, world_size: int = 16):
    """What N DDP replicas hold in all vs what is distinct: N x 16Ψ bytes for 16Ψ of information."""
    per_gpu = memory.model_state_bytes(num_params, stage=0, world_size=world_size)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(7, 3.4), gridspec_kw={"width_ratios": [3, 1.2]}
    )
    kinds = (
        ("params", PALETTE["blue"]),
        ("grads", PALETTE["orange"]),
        ("optimizer", PALETTE["green"]),
    )
    bottom = [0.0] * world_size
    for kind, color in kinds:
        heights = [getattr(per_gpu, kind) / memory.GB] * world_size
        left.bar(range(world_size), heights, bottom=bottom, color=color, label=kind)
        bottom = [b + h for b, h in zip(bottom, heights)]
    left.set(
        xlabel="GPU (rank)",
        ylabel="model states held (GB)",
        ylim=(0, 1.3 * max(bottom)),
        title=f"DDP: every GPU holds the same {per_gpu.total / memory.GB:g} GB",
    )
    left.legend(
        loc="upper center", ncol=3, frameon=False
    )  # in the headroom above the bars
    held, distinct = world_size * per_gpu.total / memory.GB, per_gpu.total / memory.GB
    bars = right.bar(
        ["held", "distinct"],
        [held, distinct],
        color=[PALETTE["vermillion"], PALETTE["sky"]],
    )
    right.bar_label(bars, labels=[f"{held:g} GB", f"{distinct:g} GB"])
    right.set(
        ylabel="GB across the cluster",
        title="across the cluster",
        ylim=(0, 1.15 * held),
    )
    fig.tight_layout()
    return fig


def traffic_chart(size_bytes: float = 1e9, world_sizes=tuple(range(2, 65))):
    """Bytes moved per all-reduce of S bytes: at a parameter server, per worker, per ring rank."""
    from zerobook.accounting import traffic

    server = [
        traffic.parameter_server_bytes(size_bytes, n)["server"] / memory.GB
        for n in world_sizes
    ]
    worker = [
        traffic.parameter_server_bytes(size_bytes, n)["per_worker"] / memory.GB
        for n in world_sizes
    ]
    ring = [
        traffic.ring_all_reduce_bytes(size_bytes, n) / memory.GB for n in world_sizes
    ]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(
        world_sizes,
        server,
        color=PALETTE["vermillion"],
        label="parameter server: received at the server",
    )
    ax.plot(
        world_sizes,
        worker,
        "--",
        color=PALETTE["orange"],
        label="parameter server: sent per worker",
    )
    ax.plot(
        world_sizes, ring, color=PALETTE["blue"], label="ring all-reduce: sent per rank"
    )
    ax.set(
        xlabel="workers N",
        ylabel="GB per all-reduce, one direction",
        yscale="log",
        title=f"All-reducing S = {size_bytes / memory.GB:g} GB of gradients",
    )
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def gradient_bytes_chart(
    held: dict[str, list[int]], lines: dict[str, float], title: str
):
    """Gradient bytes a rank holds after each gradient arrives in backward, one curve per method,
    with horizontal reference lines (e.g. the calculator's 2Ψ and 2Ψ/N); bytes shown in KiB."""
    colors = [
        PALETTE["black"],
        PALETTE["blue"],
        PALETTE["orange"],
        PALETTE["green"],
        PALETTE["purple"],
    ]
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for (label, values), color in zip(held.items(), colors):
        ax.step(
            range(1, len(values) + 1),
            [v / 1024 for v in values],
            where="post",
            color=color,
            label=label,
        )
    reference_lines(ax, {label: value / 1024 for label, value in lines.items()})
    ax.set(
        xlabel="gradients produced so far in the step (parameter tensors, all micro-batches)",
        ylabel="gradient bytes held (KiB)",
        title=title,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    fig.tight_layout()
    return fig


def scaling_chart(num_params: float, world_sizes, measured: dict[int, float]):
    """Model-state bytes per GPU against N for each ZeRO stage (the calculator), with measured
    bytes per rank (N -> bytes, scaled to `num_params`) drawn as points on the ZeRO-3 line."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for stage in memory.STAGES:
        per_gpu = [
            memory.model_state_bytes(num_params, stage=stage, world_size=n).total
            / memory.GB
            for n in world_sizes
        ]
        ax.plot(
            world_sizes,
            per_gpu,
            color=STAGE_COLORS[stage],
            label=memory.STAGE_NAMES[stage],
        )
    ax.plot(
        list(measured),
        [b / memory.GB for b in measured.values()],
        "o",
        color=PALETTE["vermillion"],
        label="ZeRO-3, measured here (bytes kept per rank, scaled)",
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="GPUs (data-parallel degree N)",
        ylabel="model states per GPU (GB)",
        title=f"{num_params / 1e9:g}B parameters, mixed-precision AdamW",
    )
    ax.set_xticks(list(world_sizes), [str(n) for n in world_sizes])
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig
