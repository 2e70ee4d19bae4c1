"""Bytes per step on each kind of link, per GPU: the ring's traffic of each stage's collectives
(zerobook.perfmodel.collectives.link_bytes), without times."""

from __future__ import annotations

from zerobook.perfmodel.collectives import link_bytes
from zerobook.perfmodel.step import Layout, grad_syncs


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
) -> dict:
    """Bytes per step a ring sends on each kind of link: "nvlink", one GPU's; "network", one
    NIC's (a node's egress over its NICs, nics_per_gpu per GPU). DDP all-reduces 2Psi over every
    rank; ZeRO-1/2 reduce-scatter and all-gather Psi over the shard group; ZeRO-3 gathers twice
    (the root once: it is kept) and reduce-scatters once; HSDP adds the all-reduce of each shard
    (Psi/G) over the N/G replicas. Weights travel in `element_bytes`, gradients in
    `reduce_bytes` (None: the same). With `micro_batches` k, ZeRO-3 gathers k times, and the
    gradients are reduced k times or once (`grad_sync`: step.grad_syncs). Each collective's
    bytes per link: collectives.link_bytes."""
    psi, group = spec.num_params(), layout.shard_group
    reduce_bytes = reduce_bytes or element_bytes
    reductions = grad_syncs(stage, micro_batches, grad_sync).count(True)
    gathered = micro_batches * (2 * psi - spec.root_params()) if stage == 3 else psi
    if stage == 0:
        parts = [("all_reduce", "all_reduce", reductions * psi * reduce_bytes)]
    else:
        parts = [
            ("all_gather", "all_gather", gathered * element_bytes),
            ("reduce_scatter", "reduce_scatter", reductions * psi * reduce_bytes),
        ]
        if layout.replicas > 1:
            parts.append(
                ("all_reduce", "replicas", reductions * psi / group * reduce_bytes)
            )
    out = {"nvlink": 0.0, "network": 0.0}
    for kind, who, size in parts:
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
