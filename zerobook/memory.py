"""Where training memory goes: the ZeRO paper's model-state accounting, and the formulas around it.

Pure arithmetic (no torch), used by the notebooks, the labs and the tests. Sizes are bytes per
rank; the ZeRO paper prints GB = 10**9 bytes (`GB`), PyTorch's allocator and DeepSpeed print
GiB = 2**30 (`GiB`).

    python -m zerobook.memory --params 7.5e9 --world-size 64
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

GB = 10**9
GiB = 2**30
STAGES = (0, 1, 2, 3)
STAGE_NAMES = {0: "DDP (baseline)", 1: "ZeRO-1 (P_os)", 2: "ZeRO-2 (P_os+g)", 3: "ZeRO-3 (P_os+g+p)"}


@dataclass(frozen=True)
class ModelStates:
    """Bytes of model states one rank holds."""

    params: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer


@dataclass(frozen=True)
class Recipe:
    """A precision recipe: bytes per parameter of weights, gradients and optimizer state."""

    name: str
    param_bytes: float
    grad_bytes: float
    optimizer_bytes: float
    source: str
    what: str

    @property
    def bytes_per_param(self) -> float:
        return self.param_bytes + self.grad_bytes + self.optimizer_bytes

    def sizes(self) -> dict:
        """The keyword arguments `model_state_bytes` and `max_model_params` take."""
        return dict(param_bytes=self.param_bytes, grad_bytes=self.grad_bytes,
                    optimizer_bytes=self.optimizer_bytes)


RECIPES = {
    "zero_paper": Recipe(
        "mixed precision, ZeRO paper", 2, 2, 12, "Rajbhandari et al. 2020",
        "fp16/bf16 weights and gradients; fp32 master weights, momentum and variance (K = 12)"),
    "fp32_grad_accum": Recipe(
        "fp32 gradient accumulation", 2, 2 + 4, 12, "Ultra-Scale Playbook (Hugging Face 2025)",
        "as the ZeRO paper, plus an fp32 buffer that accumulates gradients"),
    "fp32_grads": Recipe(
        "fp32 gradients", 2, 4, 12, "ml-engineering (Bekman)",
        "half-precision and fp32 weights, fp32 gradients only, two fp32 AdamW states"),
    "params_and_adam_moments": Recipe(
        "bf16 weights + fp32 Adam moments", 2, 0, 8, "How to Scale Your Model (scaling-book)",
        "weights and the two Adam moments only: no gradients, no fp32 master (a lower bound)"),
}


def check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def check_sizes(param_bytes: float, grad_bytes: float, optimizer_bytes: float) -> None:
    for name, value in (("param_bytes", param_bytes), ("grad_bytes", grad_bytes),
                        ("optimizer_bytes", optimizer_bytes)):
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0 bytes per parameter, got {value!r}")


def check_stage(stage: int, world_size: int) -> None:
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES} (0 = plain DDP), got {stage!r}")
    if not (isinstance(world_size, int) and world_size >= 1):
        raise ValueError(f"world_size must be an integer >= 1, got {world_size!r}")


def bytes_per_param(*, stage: int, world_size: int, param_bytes: float = 2,
                    grad_bytes: float = 2, optimizer_bytes: float = 12) -> ModelStates:
    """Bytes one rank holds per model parameter: what stage `stage` shards is divided by N."""
    check_stage(stage, world_size)
    check_sizes(param_bytes, grad_bytes, optimizer_bytes)
    n = world_size
    return ModelStates(params=param_bytes / n if stage >= 3 else param_bytes,
                       grads=grad_bytes / n if stage >= 2 else grad_bytes,
                       optimizer=optimizer_bytes / n if stage >= 1 else optimizer_bytes)


def model_state_bytes(num_params: float, *, stage: int, world_size: int, param_bytes: float = 2,
                      grad_bytes: float = 2, optimizer_bytes: float = 12) -> ModelStates:
    """Bytes of params, grads and optimizer state per rank (the ZeRO paper's Section 5.1-5.3)."""
    check_positive("num_params", num_params)
    per = bytes_per_param(stage=stage, world_size=world_size, param_bytes=param_bytes,
                          grad_bytes=grad_bytes, optimizer_bytes=optimizer_bytes)
    return ModelStates(per.params * num_params, per.grads * num_params, per.optimizer * num_params)


def max_model_params(device_bytes: float, *, stage: int, world_size: int, model_parallel: int = 1,
                     param_bytes: float = 2, grad_bytes: float = 2, optimizer_bytes: float = 12) -> float:
    """The most parameters whose model states fit in `device_bytes` per GPU (activations aside).

    world_size is the data-parallel degree N_d; with model parallelism of degree `model_parallel`
    each GPU holds 1/model_parallel of the model, as in the ZeRO paper's Table 2.
    """
    check_positive("device_bytes", device_bytes)
    check_positive("model_parallel", model_parallel)
    per = bytes_per_param(stage=stage, world_size=world_size, param_bytes=param_bytes,
                          grad_bytes=grad_bytes, optimizer_bytes=optimizer_bytes)
    return model_parallel * device_bytes / per.total


def min_world_size(num_params: float, device_bytes: float, *, stage: int, param_bytes: float = 2,
                   grad_bytes: float = 2, optimizer_bytes: float = 12) -> int | None:
    """Fewest GPUs whose per-rank model states fit in `device_bytes`; None if no number does.

    What a stage does not shard is held whole on every GPU, so it alone may never fit.
    """
    check_positive("num_params", num_params)
    check_positive("device_bytes", device_bytes)
    one = bytes_per_param(stage=stage, world_size=1, param_bytes=param_bytes,
                          grad_bytes=grad_bytes, optimizer_bytes=optimizer_bytes)
    two = bytes_per_param(stage=stage, world_size=2, param_bytes=param_bytes,
                          grad_bytes=grad_bytes, optimizer_bytes=optimizer_bytes)
    # total(N) = replicated + sharded / N, so two values of N give both parts
    sharded = 2 * (one.total - two.total) * num_params
    replicated = one.total * num_params - sharded
    if replicated >= device_bytes:
        return None if sharded > 0 or replicated > device_bytes else 1
    return max(1, math.ceil(sharded / (device_bytes - replicated)))


def comm_elements_per_step(num_params: float, *, stage: int, world_size: int) -> dict:
    """Elements each rank sends per step, by collective, with ring collectives' (N-1)/N factor.

    DDP all-reduces the gradients (2Ψ); ZeRO-1/2 reduce-scatter them and all-gather the updated
    weights (Ψ + Ψ); ZeRO-3 all-gathers weights in forward and again in backward (2Ψ) and
    reduce-scatters gradients (Ψ): 3Ψ, 1.5x DDP's traffic (not its compute).
    """
    check_positive("num_params", num_params)
    check_stage(stage, world_size)
    share = num_params * (world_size - 1) / world_size
    if stage == 0:
        return {"all_reduce": 2 * share, "total": 2 * share}
    gathers = 2 if stage == 3 else 1
    return {"reduce_scatter": share, "all_gather": gathers * share, "total": (1 + gathers) * share}


def activation_bytes_per_layer(seq_len: int, micro_batch: int, hidden: int, heads: int, *,
                               recompute: bool = False) -> float:
    """Activations one transformer layer keeps for backward, 16-bit (Korthikanti et al. 2022).

    s*b*h*(34 + 5*a*s/h) bytes; with full recomputation only the layer's input, 2*s*b*h.
    """
    for name, value in (("seq_len", seq_len), ("micro_batch", micro_batch), ("hidden", hidden),
                        ("heads", heads)):
        check_positive(name, value)
    sbh = seq_len * micro_batch * hidden
    return 2 * sbh if recompute else sbh * (34 + 5 * heads * seq_len / hidden)


DROPOUT_TERMS = ("softmax dropout mask", "attention-probability dropout output",
                 "attention dropout mask", "MLP dropout mask")


def activation_terms(seq_len: int, micro_batch: int, hidden: int, heads: int) -> dict:
    """Korthikanti et al.'s per-layer terms, in bytes (16-bit values, 1-byte dropout masks).

    They add up to `activation_bytes_per_layer`: 34*s*b*h + 5*a*s^2*b. Without dropout the
    DROPOUT_TERMS are not stored (the probabilities then feed attention x V directly).
    """
    activation_bytes_per_layer(seq_len, micro_batch, hidden, heads)  # validates the sizes
    sbh, as2b = seq_len * micro_batch * hidden, heads * seq_len**2 * micro_batch
    return {"LayerNorm inputs (two)": 4 * sbh, "QKV projection input": 2 * sbh,
            "Q and K (for Q K^T)": 4 * sbh, "softmax output": 2 * as2b,
            "softmax dropout mask": as2b, "attention-probability dropout output": 2 * as2b,
            "V": 2 * sbh, "output projection input": 2 * sbh, "attention dropout mask": sbh,
            "MLP first linear input": 2 * sbh, "GeLU input": 8 * sbh,
            "MLP second linear input": 8 * sbh, "MLP dropout mask": sbh}


def transformer_params(hidden: int, layers: int, vocab: int) -> int:
    """Parameters of a GPT-style transformer: h*v + L*(12h^2 + 13h) + 2h (tied embeddings)."""
    for name, value in (("hidden", hidden), ("layers", layers), ("vocab", vocab)):
        check_positive(name, value)
    return hidden * vocab + layers * (12 * hidden**2 + 13 * hidden) + 2 * hidden


def deepspeed_zero2_estimate(num_params: float, *, gpus_per_node: int = 1, nodes: int = 1,
                             cpu_offload: bool = True, buffer_factor: float = 1.5) -> tuple[int, int]:
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


def deepspeed_zero3_estimate(num_params: float, largest_layer_params: float, *,
                             gpus_per_node: int = 1, nodes: int = 1, cpu_offload: bool = True,
                             cpu_offload_params: bool = True, zero_init: bool = True,
                             buffer_factor: float = 1.5) -> tuple[int, int]:
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
    gpu_mem = largest_layer_memory if cpu_offload_params else largest_layer_memory + int(2 * num_params / total_gpus)
    if zero_init:
        cpu_mem = num_params * per_param * gpus_factor * buffer_factor
    else:
        cpu_mem = num_params * max(4 * gpus_per_node, per_param * gpus_factor) * buffer_factor
    return int(cpu_mem), int(gpu_mem)


def deepspeed_label(num_bytes: float) -> str:
    """How DeepSpeed prints a size: bytes / 2**30 (GiB), labelled "GB"."""
    return f"{num_bytes / GiB:.2f}GB"


def stage_table(num_params: float, world_size: int, recipe: Recipe = RECIPES["zero_paper"]) -> list[dict]:
    """One row per stage: bytes per rank of each kind of model state, and the total."""
    rows = []
    for stage in STAGES:
        states = model_state_bytes(num_params, stage=stage, world_size=world_size, **recipe.sizes())
        rows.append({"stage": stage, "name": STAGE_NAMES[stage], "params": states.params,
                     "grads": states.grads, "optimizer": states.optimizer, "total": states.total})
    return rows


def format_table(num_params: float, world_size: int, recipe: Recipe, device_gb: float) -> str:
    """The per-stage table as text, in GB = 10**9 bytes, with whether it fits the device."""
    head = (f"{num_params:.4g} parameters, {world_size} GPUs, {recipe.name} "
            f"({recipe.bytes_per_param:g} B/param); GB = 10^9 bytes")
    lines = [head, f"{'stage':<20}{'params':>10}{'grads':>10}{'optimizer':>11}{'total':>10}  fits {device_gb:g} GB?"]
    for row in stage_table(num_params, world_size, recipe):
        cells = "".join(f"{row[k] / GB:>{w}.2f}" for k, w in (("params", 10), ("grads", 10),
                                                               ("optimizer", 11), ("total", 10)))
        lines.append(f"{row['name']:<20}{cells}  {'yes' if row['total'] <= device_gb * GB else 'no'}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m zerobook.memory",
                                     description="Model-state memory per GPU for each ZeRO stage.")
    parser.add_argument("--params", type=float, required=True, help="parameter count, e.g. 7.5e9")
    parser.add_argument("--world-size", type=int, required=True, help="data-parallel GPUs N_d")
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="zero_paper")
    parser.add_argument("--device-gb", type=float, default=80.0, help="memory per GPU, GB")
    cli = parser.parse_args(argv)
    try:
        print(format_table(cli.params, cli.world_size, RECIPES[cli.recipe], cli.device_gb))
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
