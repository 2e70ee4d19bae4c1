"""ZeRO++'s hpZ on our ZeRO-3: after forward each rank keeps a second, larger shard of the 16-bit
weights, sharded only among the ranks of its node, so that backward's all-gather stays inside
the node.

    zero = Zero3AdamW(model, unit_types=(Block,), unit_cls=hpz_unit(node_size=8))

After a unit's forward, instead of keeping nothing but its 1/N shard, a rank keeps its 1/g piece
of the full weights (g = node_size, the ranks of its node, consecutive): the secondary shard,
2 Psi/g bytes in 16 bits for the whole model. Backward all-gathers those pieces over the node's
ranks only (NVLink on a GPU node), and drops them. Forward still gathers over every rank, and the
gradients are still reduce-scattered over every rank: what backward reads is forward's weights,
so the step is ZeRO-3's to the bit. DeepSpeed's `zero_hpz_partition_size`
(`_partition_param_sec` in deepspeed/runtime/zero/partition_parameters.py); FSDP2's
`fully_shard(reshard_after_forward=g)` is the same idea.
"""

from __future__ import annotations

import torch.distributed as dist

from zerobook.zero.units import Unit, in_backward


def node_groups(node_size: int):
    """(this rank's node group, its rank in it): every rank creates every node's group, in order
    (dist.new_group is collective)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    if node_size < 1 or world % node_size:
        raise ValueError(f"node_size {node_size} must divide the {world} ranks")
    groups = [
        dist.new_group(list(range(s, s + node_size)))
        for s in range(0, world, node_size)
    ]
    return groups[rank // node_size], rank % node_size


def hpz_unit(node_size: int):
    """A Unit class (Zero3's `unit_cls`) with hpZ's secondary shard over `node_size` ranks."""
    node, node_rank = node_groups(node_size)

    class HpzUnit(Unit):
        secondary = (
            None  # this rank's 1/node_size piece of the full weights, after forward
        )
        for_forward = False  # gathered by forward (the weights backward will read)

        def free(self) -> None:
            """Freed after its forward: keep the secondary piece; freed otherwise: drop it."""
            keep = self.for_forward and self.gathered and not in_backward()
            self.secondary = (
                self.flat.flat.view(node_size, -1)[node_rank].clone() if keep else None
            )
            self.for_forward = False
            super().free()

        def start_gather(self):
            """In backward, gather the node's secondary pieces; otherwise ZeRO-3's gather."""
            if self.gathered or self.pending is not None:
                return
            if self.secondary is None or not in_backward():
                self.for_forward = not in_backward()
                return super().start_gather()
            self.flat.flat.untyped_storage().resize_(self.full_bytes)
            self.gathers += 1
            self.pending = dist.all_gather_into_tensor(
                self.flat.flat, self.secondary, group=node, async_op=True
            )

    HpzUnit.__name__ = f"HpzUnit(node_size={node_size})"
    return HpzUnit
