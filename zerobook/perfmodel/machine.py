"""A "this machine" hardware preset from zerobook.runs.calibrate's measurements, so that the
performance model can be checked against steps timed here.

    hw = machine_hardware(calibration, course_gpt(config), batch=4, seq_len=128)

Every rank measured at once (ranks sharing cores share them as in training): the FLOP/s of the
course GPT's forward and backward, AdamW's seconds per element of a shard, and the all-reduce's
alpha and beta. One node of N ranks; communication takes the same cores as computation
(overlap=False), as gloo's does on a CPU host.
"""
from zerobook.hardware import Hardware
from zerobook.perfmodel.step import OPTIMIZER_BYTES_PER_ELEMENT


def forward_flops(spec, tokens: int, seq_len: int) -> float:
    """The model's forward FLOPs on `tokens` tokens (perfmodel's count, checked by FlopCounterMode)."""
    return spec.layers * spec.block_forward_flops(tokens, seq_len) + spec.root_forward_flops(tokens)


def machine_hardware(calibration: dict, spec, batch: int, seq_len: int, name: str = "this machine") -> Hardware:
    """Hardware whose numbers reproduce what `calibration` (runs.calibrate's report) measured:
    peak_flops from 3 x the forward FLOPs over the measured forward+backward seconds; the memory
    bandwidth that makes perfmodel's optimizer time (28 bytes per element) the measured one; the
    all-reduce's fitted alpha and 1/beta for the link."""
    n = calibration["world_size"]
    elements = calibration["num_params"] // n
    optimizer_s = calibration["optimizer_seconds"][str(n)] if str(n) in calibration["optimizer_seconds"] \
        else calibration["optimizer_seconds"][n]
    fit = calibration["all_reduce"]
    flops = 3 * forward_flops(spec, batch * seq_len, seq_len) / calibration["compute_seconds"]
    return Hardware(name, peak_flops=flops, memory_bytes=float("inf"),
                    memory_bandwidth=elements * OPTIMIZER_BYTES_PER_ELEMENT / optimizer_s,
                    intra_bandwidth=1 / fit["beta"], inter_bandwidth=1 / fit["beta"],
                    intra_alpha=fit["alpha"], inter_alpha=fit["alpha"], gpus_per_node=n, overlap=False,
                    source=f"zerobook.runs.calibrate on {n} ranks")
