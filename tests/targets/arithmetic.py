"""Every parity check of the course, once, on this launch's ranks: our ZeRO stages, ShardedOptimizer
and ZeroRedundancyOptimizer against DDP (fp32), and ours and FSDP2 against DDP (fp32 and bf16),
every sum in rank order. tests/test_arithmetic.py runs it under settings that change the CPU
backend's kernels as another CPU would; each run must still end with DDP's bits.

    --flush-denormal   torch.set_flush_denormal(True) in every rank (FTZ/DAZ, as some CPUs default)
"""

import argparse

import torch

import zerobook as zb
from zerobook.runs import fsdp2_side_by_side, zero_parity

parser = argparse.ArgumentParser()
parser.add_argument("--flush-denormal", action="store_true")
parser.add_argument("--steps", type=int, default=3)
cli = parser.parse_args()
me = zb.setup(verbose=False)
if cli.flush_denormal and not torch.set_flush_denormal(True):
    raise RuntimeError(
        "this CPU cannot flush denormals (torch.set_flush_denormal returned False)"
    )
methods = zero_parity.methods_of("all", torch.float32, clipped=False)
zero = zero_parity.run_scenario(
    "parity", methods, zero_parity.CONFIG, torch.float32, cli.steps, me
)
config = fsdp2_side_by_side.model_config()
fsdp2 = {
    str(dtype): fsdp2_side_by_side.compare(config, dtype, cli.steps, me)
    for dtype in (torch.float32, torch.bfloat16)
}
zb.report(
    capability=torch.backends.cpu.get_cpu_capability(),
    diffs={f"zero_parity/{m}": r["diff"] for m, r in zero.items()}
    | {
        f"{dtype}/{m}": r["diff"]
        for dtype, runs in fsdp2.items()
        for m, r in runs.items()
    },
    losses_equal={
        dtype: all(r["losses"] == runs["ddp"]["losses"] for r in runs.values())
        for dtype, runs in fsdp2.items()
    },
)
