"""Where training memory goes: the ZeRO paper's model-state accounting, and the formulas around it.

Pure arithmetic (no torch), used by the notebooks, the labs and the tests. Sizes are bytes per
rank; the ZeRO paper prints GB = 10**9 bytes (`GB`), PyTorch's allocator and DeepSpeed print
GiB = 2**30 (`GiB`).

    python -m zerobook.accounting.memory --params 7.5e9 --world-size 64
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from zerobook.accounting.recipes import RECIPES, Recipe

GB = 10**9
GiB = 2**30
STAGES = (0, 1, 2, 3)
STAGE_NAMES = {
    0: "DDP (baseline)",
    1: "ZeRO-1 (P_os)",
    2: "ZeRO-2 (P_os+g)",
    3: "ZeRO-3 (P_os+g+p)",
}


@dataclass(frozen=True)
class ModelStates:
    """Bytes of model states one rank holds."""

    params: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer


def check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def check_sizes(param_bytes: float, grad_bytes: float, optimizer_bytes: float) -> None:
    for name, value in (
        ("param_bytes", param_bytes),
        ("grad_bytes", grad_bytes),
        ("optimizer_bytes", optimizer_bytes),
    ):
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0 bytes per parameter, got {value!r}")


def check_stage(stage: int, world_size: int) -> None:
    if stage not in STAGES:
        raise ValueError(
            f"stage must be one of {STAGES} (0 = plain DDP), got {stage!r}"
        )
    if not (isinstance(world_size, int) and world_size >= 1):
        raise ValueError(f"world_size must be an integer >= 1, got {world_size!r}")


def bytes_per_param(
    *,
    stage: int,
    world_size: int,
    param_bytes: float = 2,
    grad_bytes: float = 2,
    optimizer_bytes: float = 12,
) -> ModelStates:
    """Bytes one rank holds per model parameter: what stage `stage` shards is divided by N."""
    check_stage(stage, world_size)
    check_sizes(param_bytes, grad_bytes, optimizer_bytes)
    n = world_size
    return ModelStates(
        params=param_bytes / n if stage >= 3 else param_bytes,
        grads=grad_bytes / n if stage >= 2 else grad_bytes,
        optimizer=optimizer_bytes / n if stage >= 1 else optimizer_bytes,
    )


def model_state_bytes(
    num_params: float,
    *,
    stage: int,
    world_size: int,
    param_bytes: float = 2,
    grad_bytes: float = 2,
    optimizer_bytes: float = 12,
) -> ModelStates:
    """Bytes of params, grads and optimizer state per rank (the ZeRO paper's Section 5.1-5.3)."""
    check_positive("num_params", num_params)
    per = bytes_per_param(
        stage=stage,
        world_size=world_size,
        param_bytes=param_bytes,
        grad_bytes=grad_bytes,
        optimizer_bytes=optimizer_bytes,
    )
    return ModelStates(
        per.params * num_params, per.grads * num_params, per.optimizer * num_params
    )


def max_model_params(
    device_bytes: float,
    *,
    stage: int,
    world_size: int,
    model_parallel: int = 1,
    param_bytes: float = 2,
    grad_bytes: float = 2,
    optimizer_bytes: float = 12,
) -> float:
    """The most parameters whose model states fit in `device_bytes` per GPU (activations aside).

    world_size is the data-parallel degree N_d; with model parallelism of degree `model_parallel`
    each GPU holds 1/model_parallel of the model, as in the ZeRO paper's Table 2.
    """
    check_positive("device_bytes", device_bytes)
    check_positive("model_parallel", model_parallel)
    per = bytes_per_param(
        stage=stage,
        world_size=world_size,
        param_bytes=param_bytes,
        grad_bytes=grad_bytes,
        optimizer_bytes=optimizer_bytes,
    )
    return model_parallel * device_bytes / per.total


def min_world_size(
    num_params: float,
    device_bytes: float,
    *,
    stage: int,
    param_bytes: float = 2,
    grad_bytes: float = 2,
    optimizer_bytes: float = 12,
) -> int | None:
    """Fewest GPUs whose per-rank model states fit in `device_bytes`; None if no number does.

    What a stage does not shard is held whole on every GPU, so it alone may never fit.
    """
    check_positive("num_params", num_params)
    check_positive("device_bytes", device_bytes)
    one = bytes_per_param(
        stage=stage,
        world_size=1,
        param_bytes=param_bytes,
        grad_bytes=grad_bytes,
        optimizer_bytes=optimizer_bytes,
    )
    two = bytes_per_param(
        stage=stage,
        world_size=2,
        param_bytes=param_bytes,
        grad_bytes=grad_bytes,
        optimizer_bytes=optimizer_bytes,
    )
    # total(N) = replicated + sharded / N, so two values of N give both parts
    sharded = 2 * (one.total - two.total) * num_params
    replicated = one.total * num_params - sharded
    if replicated >= device_bytes:
        return None if sharded > 0 or replicated > device_bytes else 1
    return max(1, math.ceil(sharded / (device_bytes - replicated)))


def stage_table(
    num_params: float, world_size: int, recipe: Recipe = RECIPES["zero_paper"]
) -> list[dict]:
    """One row per stage: bytes per rank of each kind of model state, and the total."""
    rows = []
    for stage in STAGES:
        states = model_state_bytes(
            num_params, stage=stage, world_size=world_size, **recipe.sizes()
        )
        rows.append(
            {
                "stage": stage,
                "name": STAGE_NAMES[stage],
                "params": states.params,
                "grads": states.grads,
                "optimizer": states.optimizer,
                "total": states.total,
            }
        )
    return rows


def format_table(
    num_params: float, world_size: int, recipe: Recipe, device_gb: float
) -> str:
    """The per-stage table as text, in GB = 10**9 bytes, with whether it fits the device."""
    head = (
        f"{num_params:.4g} parameters, {world_size} GPUs, {recipe.name} "
        f"({recipe.bytes_per_param:g} B/param); GB = 10^9 bytes"
    )
    lines = [
        head,
        f"{'stage':<20}{'params':>10}{'grads':>10}{'optimizer':>11}{'total':>10}  fits {device_gb:g} GB?",
    ]
    for row in stage_table(num_params, world_size, recipe):
        cells = "".join(
            f"{row[k] / GB:>{w}.2f}"
            for k, w in (
                ("params", 10),
                ("grads", 10),
                ("optimizer", 11),
                ("total", 10),
            )
        )
        lines.append(
            f"{row['name']:<20}{cells}  {'yes' if row['total'] <= device_gb * GB else 'no'}"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m zerobook.accounting.memory",
        description="Model-state memory per GPU for each ZeRO stage.",
    )
    parser.add_argument(
        "--params", type=float, required=True, help="parameter count, e.g. 7.5e9"
    )
    parser.add_argument(
        "--world-size", type=int, required=True, help="data-parallel GPUs N_d"
    )
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="zero_paper")
    parser.add_argument(
        "--device-gb", type=float, default=80.0, help="memory per GPU, GB"
    )
    cli = parser.parse_args(argv)
    try:
        print(
            format_table(cli.params, cli.world_size, RECIPES[cli.recipe], cli.device_gb)
        )
    except ValueError as error:
        parser.error(str(error))


if __name__ == "__main__":
    main()
