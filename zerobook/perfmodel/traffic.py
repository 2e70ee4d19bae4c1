"""Bytes per step on each kind of link, per GPU: the ring's traffic of each stage's collectives
(zerobook.perfmodel.collectives.link_bytes), without times."""

from __future__ import annotations

from zerobook.perfmodel import zeropp as zero_pp
from zerobook.perfmodel.accumulation import grad_syncs
from zerobook.perfmodel.collectives import link_bytes
from zerobook.perfmodel.step import Layout
from zerobook.perfmodel.zeropp import QGZ_BYTES, QWZ_BYTES


def traffic_per_gpu(
    spec,
    stage: int,
    layout: Layout,
    element_bytes: int = 2,
    nics_per_gpu: float = 1.0,
    *,
    reduce_bytes: int | None = None,
    micro_batches: int = 1,
    grad_sync: str | None = None,
    zeropp=(),
) -> dict:
    """Bytes per step a ring sends on each kind of link: "nvlink", one GPU's; "network", one
    NIC's (a node's egress over its NICs, nics_per_gpu per GPU). DDP all-reduces 2Psi over every
    rank; ZeRO-1/2 reduce-scatter and all-gather Psi over the shard group; ZeRO-3 gathers twice
    (the root once: it is kept) and reduce-scatters once; HSDP adds the all-reduce of each shard
    (Psi/G) over the N/G replicas. Weights travel in `element_bytes`, gradients in
    `reduce_bytes` (None: the same). With `micro_batches` k, ZeRO-3 gathers k times, and the
    gradients are reduced k times or once (`grad_sync`: accumulation.grad_syncs). ZeRO++
    (`zeropp`, stage 3): qwZ gathers int8 weights (hpZ's backward gathers too, as DeepSpeed
    quantizes every fetch), hpZ's backward gathers stay in the node, qgZ sends int4 gradients
    in two all-to-alls (zerobook.perfmodel.zeropp). Each collective's bytes per link:
    collectives.link_bytes."""
    parts = zero_pp.check(zeropp, stage)
    psi, group = spec.num_params(), layout.shard_group
    reduce_bytes = reduce_bytes or element_bytes
    reductions = grad_syncs(stage, micro_batches, grad_sync).count(True)
    weights = QWZ_BYTES if "qwZ" in parts else element_bytes
    out = {"nvlink": 0.0, "network": 0.0}
    if stage == 0:
        sends = [("all_reduce", "all_reduce", reductions * psi * reduce_bytes)]
    elif (
        stage == 3
    ):  # forward gathers every unit, backward all but the root (it is kept)
        again = micro_batches * (psi - spec.root_params())
        sends = [
            ("all_gather", "all_gather", micro_batches * psi * weights),
            ("all_gather", "node", again * weights)
            if "hpZ" in parts
            else ("all_gather", "all_gather", again * weights),
        ]
    else:
        sends = [("all_gather", "all_gather", psi * element_bytes)]
    if (
        "qgZ" in parts
    ):  # int4 all-to-alls: the node's share to each peer, then a g-th across
        ranks, g = layout.group("reduce_scatter")
        size, nodes = reductions * psi * QGZ_BYTES, ranks // g
        out["nvlink"] += size * (g - 1) / g
        out["network"] += size / g * (nodes - 1) / nodes / nics_per_gpu
    elif stage:
        sends.append(
            ("reduce_scatter", "reduce_scatter", reductions * psi * reduce_bytes)
        )
        if layout.replicas > 1:
            sends.append(
                ("all_reduce", "replicas", reductions * psi / group * reduce_bytes)
            )
    for kind, who, size in sends:
        if who == "node":  # the GPUs of one node
            ranks = per_node = min(layout.shard_group, layout.gpus_per_node)
        else:
            ranks, per_node = layout.group(who)
        sent = link_bytes(
            kind,
            size,
            world_size=ranks,
            gpus_per_node=per_node,
            nics_per_gpu=nics_per_gpu,
        )
        out["nvlink"] += sent["nvlink"]
        out["network"] += sent["nic"]
    return out
