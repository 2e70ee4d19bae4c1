"""ZeRO++'s qgZ on our ZeRO-3 (zerobook.zero.qgz): 4 ranks as two "nodes" of two, the bytes of
its all-to-alls by group, the error of the int4 sum against the exact one, and a short training
on real text with and without it.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.zeropp_qgz

Every rank reports: `bytes`, one step's collectives by group (ZeRO-3 and qgZ) and the units'
elements; `error`, for random gradients (seeded by rank): the largest |int4 sum - exact sum| over
the largest |exact sum|, and mean over mean; `train`, the loss of every step both ways.
"""

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.train.models import next_token_loss
from zerobook.zero.trials import batch, start, train_curves, zero3
from zerobook.zero.qgz import groups_of, quantized_reduce_scatter, qgz_unit


def bytes_part(me, data, node_size: int) -> dict:
    out = {}
    for way, size in (("ZeRO-3", None), ("qgZ", node_size)):
        model, zero = zero3(qgz_unit(size) if size else None, me.device)
        with CommMeter() as meter:
            next_token_loss(model, batch(data, 0, me, 8)).backward()
            zero.step()
        out[way] = meter.summary(by_group=True)
    out["units"] = {u.name: u.flat.padded for u in zero.units}
    return out


def error_part(me, node_size: int, elements: int = 4 * 3 * 1024) -> dict:
    groups = groups_of(node_size)
    torch.manual_seed(me.rank)
    grads = torch.randn(elements) * torch.logspace(-2, 0, elements)  # drawn on the CPU
    grads = grads.to(me.device)
    exact = torch.empty(elements // me.world_size, device=me.device)
    dist.reduce_scatter_tensor(exact, grads.clone())
    got = quantized_reduce_scatter(grads, groups, 256)
    error = (got - exact).abs()
    return {
        "worst": (error.max() / exact.abs().max()).item(),
        "mean": (error.mean() / exact.abs().mean()).item(),
        "largest_input": grads.abs().max().item(),
        "worst_abs": error.max().item(),
    }


def train_part(me, data, node_size: int, steps: int) -> dict:
    ways = {"ZeRO-3": None, "qgZ": qgz_unit(node_size)}
    return train_curves(me, data, ways, steps, rows=8)


def main() -> None:
    cli, me, data = start(__doc__, steps=30)
    zb.report(
        world_size=me.world_size,
        node_size=cli.node_size,
        bytes=bytes_part(me, data, cli.node_size),
        error=error_part(me, cli.node_size),
        train=train_part(me, data, cli.node_size, cli.steps),
    )


if __name__ == "__main__":
    main()
