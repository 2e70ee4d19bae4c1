"""ZeRO++'s qgZ on our ZeRO-3: each unit's reduce-scatter becomes two all-to-alls of 4-bit
gradients, first inside the node, then across nodes.

    zero = Zero3AdamW(model, unit_types=(Block,), unit_cls=qgz_unit(node_size=8))

The N = g x nodes ranks are numbered node by node (rank = node x g + local). A unit's gradient
buffer (P elements) holds N pieces of P/N, piece r being what rank r keeps. Inside the node, rank
(n, j) sends its node peer j' the pieces of every rank with local index j' (one per node), in
int4; each rank dequantizes what its g peers sent and adds it up: the node's partial sums of the
pieces of its local index. Across nodes, the ranks with the same local index send each other
those partial sums, in int4 again, and each adds up the nodes' sums of its own piece. A rank
sends (g-1)/g of P inside the node and (nodes-1)/nodes of P/g across, half a byte an element
(and a scale per block): where a reduce-scatter in bf16 sends 2 (N-1)/N of P, through the NICs
as well. DeepSpeed: all_to_all_quant_reduce (deepspeed/runtime/comm/coalesced_collectives.py).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from zerobook.zero.units import Unit

LEVELS = 7  # symmetric int4: -7..7, stored as 1..15 in a nibble


def quantize4(rows: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed uint8, fp32 scales) of each row of a 2-D tensor, in blocks of `block` (even)
    elements, each row zero-padded to whole blocks: two codes a byte, one scale a block."""
    count, width = rows.shape
    padded = -(-width // block) * block
    blocks = torch.zeros(count, padded, dtype=torch.float32, device=rows.device)
    blocks[:, :width] = rows.float()
    blocks = blocks.view(count, -1, block)
    scales = blocks.abs().amax(dim=2) / LEVELS
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    codes = (
        torch.round(blocks / scales[..., None]).clamp_(-LEVELS, LEVELS).to(torch.int16)
    )
    nibbles = (codes + LEVELS + 1).to(torch.uint8).view(count, -1)  # 1..15
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << 4), scales


def dequantize4(packed: torch.Tensor, scales: torch.Tensor, width: int) -> torch.Tensor:
    """The fp32 rows the packed codes stand for, each cut back to `width`."""
    count = packed.shape[0]
    nibbles = torch.stack([packed & 15, packed >> 4], dim=2).view(count, -1)
    codes = nibbles.to(torch.float32) - (LEVELS + 1)
    values = codes.view(count, scales.shape[1], -1) * scales[..., None]
    return values.view(count, -1)[:, :width]


def exchange(rows: torch.Tensor, group, block: int) -> torch.Tensor:
    """Row i of `rows` to the group's rank i, in int4 (codes, then scales); the rows received."""
    packed, scales = quantize4(rows, block)
    got_packed, got_scales = torch.empty_like(packed), torch.empty_like(scales)
    dist.all_to_all_single(got_packed, packed, group=group)
    dist.all_to_all_single(got_scales, scales, group=group)
    return dequantize4(got_packed, got_scales, rows.shape[1])


def groups_of(node_size: int):
    """(this rank's node group, the group of the ranks with its local index, g, nodes): every
    rank creates every group, in the same order (dist.new_group is collective)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    if node_size < 1 or world % node_size:
        raise ValueError(f"node_size {node_size} must divide the {world} ranks")
    nodes = world // node_size
    inside = [
        dist.new_group(list(range(s, s + node_size)))
        for s in range(0, world, node_size)
    ]
    across = [
        dist.new_group(list(range(j, world, node_size))) for j in range(node_size)
    ]
    return inside[rank // node_size], across[rank % node_size], node_size, nodes


def quantized_reduce_scatter(full: torch.Tensor, groups, block: int) -> torch.Tensor:
    """This rank's piece of the sum of every rank's `full` (1-D, N pieces), through the two
    int4 all-to-alls; fp32."""
    inside, across, g, nodes = groups
    pieces = full.float().view(nodes, g, -1)  # [node, local index, piece]
    for_local = pieces.transpose(0, 1).reshape(
        g, -1
    )  # row j: the pieces of local index j
    node_sums = exchange(for_local, inside, block).sum(dim=0).view(nodes, -1)
    return exchange(node_sums, across, block).sum(dim=0)


def qgz_unit(node_size: int, block: int = 256):
    """A Unit class (Zero3's `unit_cls`) whose gradients go through qgZ's two all-to-alls."""
    groups = groups_of(node_size)

    class QgzUnit(Unit):
        @torch.no_grad()
        def start_reduce(self) -> None:
            """The two all-to-alls, now (the sum of this rank's piece, fp32, kept for
            finish_reduce), and the gradient buffer dropped."""
            total = quantized_reduce_scatter(self.grad_buffer, groups, block)
            self.reducing = (total,)
            self.grad_buffer, self.arrived = None, 0

        @torch.no_grad()
        def finish_reduce(self) -> None:
            (total,) = self.reducing
            self.grad_shard.add_(
                total.div_(self.contributors).to(self.grad_shard.dtype)
            )
            self.reducing = None

    QgzUnit.__name__ = f"QgzUnit(node_size={node_size}, block={block})"
    return QgzUnit
