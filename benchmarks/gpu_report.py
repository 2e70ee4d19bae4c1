"""The markdown of benchmarks/gpu.py's results: each section's table and the ratios it is for
(gpu_report_host: the host's paths, memory and links; gpu_report_device: what the device computes
and records)."""

from gpu_report_device import (
    capstone,
    compute_model,
    flight_recorder,
    fp8_matmul,
    matmul,
    nccl_debug,
    offload,
    quantize,
    torchao,
)
from gpu_report_host import (
    bandwidth,
    collectives,
    header,
    memory,
    runs,
    step_times,
    streams,
)


def render(results: dict) -> str:
    device = results["environment"].get("device", "CPU")
    parts = header(results)
    for name, fn in (
        ("collectives", collectives),
        ("runs", runs),
        (
            "labs",
            lambda section: runs(
                section, "### Every lab's reference solution, part by part", "lab/part"
            ),
        ),
        ("memory", memory),
        (
            "memory_expandable",
            lambda section: memory(
                section,
                "### The same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            ),
        ),
        ("bandwidth", bandwidth),
        ("step_times", step_times),
    ):
        if name in results:
            parts += fn(results[name])
    if "streams" in results:
        parts += streams(results["streams"])
    if "matmul" in results:
        parts += matmul(results["matmul"], device)
    if "compute_model" in results:
        parts += compute_model(results["compute_model"], results["matmul"])
    if "offload" in results:
        parts += offload(results["offload"])
    if "capstone" in results:
        parts += capstone(results["capstone"])
    if "quantize" in results:
        parts += quantize(results["quantize"])
    if "nccl_debug" in results:
        parts += nccl_debug(results["nccl_debug"])
    if "fp8_matmul" in results:
        parts += fp8_matmul(results["fp8_matmul"], device)
    if "flight_recorder" in results:
        parts += flight_recorder(results["flight_recorder"])
    if "torchao" in results:
        parts += torchao(results["torchao"])
    return "\n".join(parts)
