"""A "this machine" hardware preset from zerobook.runs.calibrate's measurements, so that the
performance model can be checked against steps timed here.

    hw = machine_hardware(calibration, course_gpt(config), batch=4, seq_len=128)
    predict_runs(calibration, course_gpt(config), batch=4, seq_len=128)  # method -> Prediction

Every rank measured at once (ranks sharing cores share them as in training): the FLOP/s of the
course GPT's forward and backward, AdamW's seconds per element of a shard, and the all-reduce's
alpha and beta. One node of N ranks; communication takes the same cores as computation
(overlap=False), as gloo's does on a CPU host, and a reduce-scatter takes the measured multiple of
an all-reduce's time (gloo's is an all-reduce and copies: hardware.Hardware.reduce_scatter).
"""

from zerobook.accounting.hardware import Hardware
from zerobook.perfmodel import predict_step
from zerobook.perfmodel.step import OPTIMIZER_BYTES_PER_ELEMENT

DDP_BUCKET_BYTES = (
    25 * 2**20
)  # torch DDP's bucket_cap_mb (its first bucket, 1 MiB, left out)
ZERO2_BUCKET_NUMEL = 2**18  # zerobook.runs.zero_speed's (tested equal)
RUNS = {  # method -> (run, key in its report, stage, prefetch, gradient bucket in fp32 elements)
    "DDP": ("zero_speed", "ddp", 0, False, DDP_BUCKET_BYTES // 4),
    "ZeRO-1": (
        "zero_speed",
        "zero1",
        1,
        False,
        "all",
    ),  # one bucket, reduced after backward
    "ZeRO-2": ("zero_speed", "zero2_overlap", 2, False, ZERO2_BUCKET_NUMEL),
    "ZeRO-3": ("zero3_speed", "ours", 3, False, None),  # None: one collective per unit
    "ZeRO-3 + prefetch": ("zero3_speed", "ours_prefetch", 3, True, None),
}


def forward_flops(spec, tokens: int, seq_len: int) -> float:
    """The model's forward FLOPs on `tokens` tokens (perfmodel's count, checked by FlopCounterMode)."""
    return spec.layers * spec.block_forward_flops(
        tokens, seq_len
    ) + spec.root_forward_flops(tokens)


def machine_hardware(
    calibration: dict, spec, batch: int, seq_len: int, name: str = "this machine"
) -> Hardware:
    """Hardware whose numbers reproduce what `calibration` (runs.calibrate's report) measured:
    peak_flops from 3 x the forward FLOPs over the measured forward+backward seconds; the memory
    bandwidth that makes perfmodel's optimizer time (28 bytes per element) the measured one; the
    all-reduce's fitted alpha and 1/beta for the link; the reduce-scatter's measured time over the
    all-reduce's."""
    n = calibration["world_size"]
    elements = calibration["num_params"] // n
    optimizer_s = (
        calibration["optimizer_seconds"][str(n)]
        if str(n) in calibration["optimizer_seconds"]
        else calibration["optimizer_seconds"][n]
    )
    fit = calibration["all_reduce"]
    flops = (
        3
        * forward_flops(spec, batch * seq_len, seq_len)
        / calibration["compute_seconds"]
    )
    return Hardware(
        name,
        peak_flops=flops,
        memory_bytes=float("inf"),
        memory_bandwidth=elements * OPTIMIZER_BYTES_PER_ELEMENT / optimizer_s,
        intra_bandwidth=1 / fit["beta"],
        nic_bandwidth=1 / fit["beta"],
        nics_per_node=n,
        gpus_per_node=n,
        generation=None,
        intra_alpha=fit["alpha"],
        inter_alpha=fit["alpha"],
        overlap=False,
        reduce_scatter=calibration["reduce_scatter_over_all_reduce"] or 0.5,
        sustained_source="calibrated: the measured step over its FLOPs",
        source=f"zerobook.runs.calibrate on {n} ranks",
    )


def predict_runs(
    calibration: dict, spec, batch: int, seq_len: int, naive: bool = False
) -> dict:
    """Method -> predict_step's Prediction of the steps benchmarks/perfmodel.py times (RUNS), on
    this machine's preset, each told its gradient buckets. naive: as if the backend were a ring
    (reduce-scatter half an all-reduce) and every method reduced one collective per unit."""
    hardware = machine_hardware(calibration, spec, batch=batch, seq_len=seq_len)
    if naive:
        hardware = hardware.with_(reduce_scatter=0.5)
    n, out = calibration["world_size"], {}
    for name, (_, _, stage, prefetch, bucket) in RUNS.items():
        bucket = None if naive else spec.num_params() if bucket == "all" else bucket
        out[name] = predict_step(
            spec,
            hardware,
            world_size=n,
            gpus_per_node=n,
            stage=stage,
            micro_batch=batch,
            seq_len=seq_len,
            prefetch=prefetch,
            dtype="fp32",
            bucket_params=bucket,
        )
    return out
