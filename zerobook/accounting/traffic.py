"""Traffic formulas (pure arithmetic): what a ring and a parameter server move, in bytes.

nccl-tests' convention (doc/PERFORMANCE.md): algbw = S / t for a buffer of S bytes, and
busbw = algbw x factor, the factor being what a bandwidth-optimal ring sends per rank, over S.
"""

from __future__ import annotations

from zerobook.accounting.memory import check_positive, check_stage

BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    # an all-to-all: each rank keeps its own piece and sends the rest
    "all_to_all": lambda n: (n - 1) / n,
}


def check(size: float, world_size: int) -> None:
    if not size > 0:
        raise ValueError(f"size must be > 0 bytes, got {size!r}")
    if not (isinstance(world_size, int) and world_size >= 1):
        raise ValueError(f"world_size must be an integer >= 1, got {world_size!r}")


def ring_all_reduce_bytes(size: float, world_size: int) -> float:
    """Bytes each rank sends (and receives) in a ring all-reduce of S bytes: 2(N-1)/N * S."""
    check(size, world_size)
    return BUS_FACTORS["all_reduce"](world_size) * size


def parameter_server_bytes(size: float, world_size: int) -> dict:
    """A server that sums N workers' gradients of S bytes and sends the sum back, one direction.

    Each worker sends S (and receives S); the server receives N*S (and sends N*S): its link
    carries N times what any ring link does, and grows with N.
    """
    check(size, world_size)
    return {"per_worker": size, "server": world_size * size}


def bandwidth(size: float, seconds: float, op: str, world_size: int) -> dict:
    """nccl-tests' algbw and busbw, in bytes per second, for one collective of S bytes."""
    check(size, world_size)
    algbw = size / seconds
    return {"algbw": algbw, "busbw": algbw * BUS_FACTORS[op](world_size)}


def fit_alpha_beta(sizes, seconds, world_size: int) -> dict:
    """Fit the ring all-reduce model t(S) = 2(N-1)*alpha + 2(N-1)/N * S * beta to measurements.

    Weighted least squares on relative error, so small (latency-bound) and large
    (bandwidth-bound) sizes count alike. alpha: seconds per step; beta: seconds per byte on a
    link. crossover: the size where the latency and bandwidth terms are equal.
    """
    if world_size < 2 or len(sizes) < 2:
        raise ValueError("a fit needs world_size >= 2 and at least two sizes")
    weights = [1 / t**2 for t in seconds]
    sw = sum(weights)
    mean_s = sum(w * s for w, s in zip(weights, sizes)) / sw
    mean_t = sum(w * t for w, t in zip(weights, seconds)) / sw
    slope = sum(
        w * (s - mean_s) * (t - mean_t) for w, s, t in zip(weights, sizes, seconds)
    ) / sum(w * (s - mean_s) ** 2 for w, s in zip(weights, sizes))
    intercept = mean_t - slope * mean_s
    steps = 2 * (world_size - 1)
    return {
        "alpha": intercept / steps,
        "beta": slope / BUS_FACTORS["all_reduce"](world_size),
        "crossover": intercept / slope,
        "intercept": intercept,
        "slope": slope,
    }


def predicted_seconds(fit: dict, size: float) -> float:
    """The fitted model's time for one all-reduce of `size` bytes."""
    return fit["intercept"] + fit["slope"] * size


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
    return {
        "reduce_scatter": share,
        "all_gather": gathers * share,
        "total": (1 + gathers) * share,
    }
