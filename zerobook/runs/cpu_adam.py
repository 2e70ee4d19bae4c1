"""The CPU's AdamW step at the sizes offload hands it, with every rank of a host stepping its own
shard at once: what ZeRO-Offload's host does for its N GPUs (zerobook.train.measure's timing).

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.cpu_adam --elements 4e6 64e6

Each rank steps one fp32 shard of each size (master, gradient, momentum and variance: 16 bytes
an element) with torch.optim.AdamW (its default, a loop of tensor operations, and `fused`, the
CPU kernel), all ranks starting each timing together (a barrier); every rank reports its
elements per second and its threads (as the launcher set them).
"""

import argparse

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.train import measure

IMPLEMENTATIONS = {"default": {}, "fused": {"fused": True}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--elements", type=float, nargs="+", default=[4e6, 64e6])
    parser.add_argument("--repeats", type=int, default=3)
    cli = parser.parse_args()
    me = zb.setup(verbose=False)
    rates = {}
    for elements in map(int, cli.elements):
        for name, options in IMPLEMENTATIONS.items():
            dist.barrier()  # every rank steps at once: they share the host's memory and cores
            rates[f"{name} {elements}"] = measure.adamw_elements_per_second(
                elements, steps=2, repeats=cli.repeats, **options
            )
    zb.report(ranks=me.world_size, threads=torch.get_num_threads(), rates=rates)


if __name__ == "__main__":
    main()
