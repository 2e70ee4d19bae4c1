"""DeepSpeed's own memory estimators, reproduced to the integer: what
`estimate_zero2_model_states_mem_needs` and `estimate_zero3_model_states_mem_needs` print, with
DeepSpeed's defaults (both offloads on) and its operations in its order. Pure arithmetic.

    cpu, gpu = deepspeed_zero2_estimate(7.5e9, gpus_per_node=8, cpu_offload=False)
    deepspeed_label(gpu)  # "…GB": DeepSpeed divides by 2**30 and writes GB
"""

from __future__ import annotations

from zerobook.accounting.memory import GiB, check_positive


def deepspeed_zero2_estimate(
    num_params: float,
    *,
    gpus_per_node: int = 1,
    nodes: int = 1,
    cpu_offload: bool = True,
    buffer_factor: float = 1.5,
) -> tuple[int, int]:
    """(cpu_bytes, gpu_bytes) exactly as DeepSpeed's `estimate_zero2_model_states_mem_needs`
    computes them (deepspeed/runtime/zero/stage_1_and_2.py, release v0.19.5, the same since
    v0.14.3): the same defaults (cpu_offload=True, as DeepSpeed's), the same operations in the
    same order, so the same integers.

    Without offload a GPU holds 16-bit weights (2Ψ) plus 18Ψ/N: 16-bit and fp32 gradients, fp32
    master weights and two Adam states. The CPU side carries an extra buffer factor of 1.5.
    """
    check_positive("num_params", num_params)
    total_gpus = nodes * gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * num_params
        cpu_mem = num_params * max(4 * total_gpus, 16) * buffer_factor
    else:
        gpu_mem = 2 * num_params + int(18 * num_params / total_gpus)
        cpu_mem = num_params * 4 * gpus_per_node * buffer_factor
    return int(cpu_mem), int(gpu_mem)


def deepspeed_zero3_estimate(
    num_params: float,
    largest_layer_params: float,
    *,
    gpus_per_node: int = 1,
    nodes: int = 1,
    cpu_offload: bool = True,
    cpu_offload_params: bool = True,
    zero_init: bool = True,
    buffer_factor: float = 1.5,
) -> tuple[int, int]:
    """(cpu_bytes, gpu_bytes) exactly as DeepSpeed's `estimate_zero3_model_states_mem_needs`
    computes them (deepspeed/runtime/zero/stage3.py, release v0.19.5; it also returns the
    largest layer's bytes):
    DeepSpeed's defaults (both offloads on), its operations in its order (`total_params * 18 *
    gpus_factor * buffer` left to right), so the same integers.

    A GPU always keeps room for the largest layer gathered (4 bytes per its parameter); without
    offload it also holds 18Ψ/N of sharded states.
    """
    check_positive("num_params", num_params)
    total_gpus, gpus_factor = nodes * gpus_per_node, 1 / nodes
    largest_layer_memory = 4 * largest_layer_params
    if not cpu_offload:
        gpu_mem = largest_layer_memory + int(18 * num_params / total_gpus)
        on_cpu = largest_layer_params if zero_init else num_params
        return int(on_cpu * 4 * gpus_per_node * buffer_factor), int(gpu_mem)
    per_param = 18 if cpu_offload_params else 16
    gpu_mem = (
        largest_layer_memory
        if cpu_offload_params
        else largest_layer_memory + int(2 * num_params / total_gpus)
    )
    if zero_init:
        cpu_mem = num_params * per_param * gpus_factor * buffer_factor
    else:
        cpu_mem = (
            num_params * max(4 * gpus_per_node, per_param * gpus_factor) * buffer_factor
        )
    return int(cpu_mem), int(gpu_mem)


def deepspeed_label(num_bytes: float) -> str:
    """How DeepSpeed prints a size: bytes / 2**30 (GiB), labelled "GB"."""
    return f"{num_bytes / GiB:.2f}GB"
