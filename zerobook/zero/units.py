"""ZeRO-3's unit: the parameters one module owns, kept as a 1/N shard and gathered only to be used.

A unit's parameters live in one flat buffer padded to a multiple of N (a `FlatParams` with one
bucket). Between uses the buffer's storage is freed — resized to zero bytes — and the rank keeps
only its shard (numel/N, 16-bit) and the shard of its gradient. Gathering resizes the storage
back and all-gathers every rank's shard into it, so the parameters (views of that storage, and
any tensor autograd saved for backward) see the full weights again.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from zerobook.zero.flat import FlatParams


def wrap_policy(model: torch.nn.Module, unit_types: tuple) -> list[tuple[str, list]]:
    """(name, parameters) per unit: each module of `unit_types` is one unit (its parameters not
    already in a unit), and the root takes every trainable parameter left (like FSDP's auto-wrap)."""
    claimed, units = set(), []
    for name, module in model.named_modules():
        if name and isinstance(module, unit_types):
            params = [
                p
                for p in module.parameters()
                if p.requires_grad and id(p) not in claimed
            ]
            claimed.update(id(p) for p in params)
            if (
                params
            ):  # a module inside a unit already taken (a Linear in a Block) is no unit
                units.append((name, params))
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in claimed]
    return ([("root", rest)] if rest else []) + units


def in_backward() -> bool:
    """True while autograd's engine runs a backward pass (on this thread): a module's forward
    called now is activation checkpointing recomputing it."""
    return torch._C._current_graph_task_id() != -1


class Unit:
    """One unit's flat parameters: this rank's shard always, the full buffer only when gathered.

    Hook points a subclass may replace (the labs do): `start_gather` and `free`; `log(what, unit)`
    records an event in the owner's timeline (Zero3 passes its own)."""

    def __init__(
        self, name: str, params: list, group=None, log=None, replicate_group=None
    ):
        self.name, self.group, self.replicate_group = name, group, replicate_group
        self.log = log or (lambda what, unit: None)
        self.rank, world_size = dist.get_rank(group), dist.get_world_size(group)
        dtypes = sorted({str(p.dtype) for p in params})
        if len(dtypes) > 1:
            raise ValueError(
                f"unit {name!r} mixes dtypes {dtypes}: one all-gather moves one dtype; "
                f"give each dtype its own unit (unit_types)"
            )
        self.flat = FlatParams(params, world_size, flat_grads=False)
        self.shard = self.flat.shard(self.flat.flat, self.rank)  # 16-bit, numel/N, kept
        self.grad_shard = torch.zeros_like(
            self.shard
        )  # averaged over ranks, this rank's part
        replicas = (
            1 if replicate_group is None else dist.get_world_size(replicate_group)
        )
        self.contributors = (
            world_size * replicas
        )  # the ranks whose gradients a shard sums
        self.full_bytes = self.flat.flat.untyped_storage().nbytes()
        self.grad_buffer: torch.Tensor | None = None
        self.arrived = 0
        self.pending = None  # an all-gather in flight (prefetch)
        self.reducing = (
            None  # a reduce-scatter in flight: (work, output shard, gradient buffer)
        )
        self.gathers = 0  # all-gathers issued so far
        self.free()

    @property
    def gathered(self) -> bool:
        return self.flat.flat.untyped_storage().nbytes() > 0

    def free(self) -> None:
        """Drop the full parameters: the storage behind every view shrinks to zero bytes."""
        self.flat.flat.untyped_storage().resize_(0)

    def start_gather(self):
        """Allocate the full buffer and start an all-gather of every rank's shard into it (async)."""
        if self.gathered or self.pending is not None:
            return
        self.flat.flat.untyped_storage().resize_(self.full_bytes)
        self.gathers += 1
        self.pending = dist.all_gather_into_tensor(
            self.flat.flat, self.shard, group=self.group, async_op=True
        )

    def wait_gather(self) -> None:
        """Make sure the full parameters are here: gather now, or wait for a prefetch."""
        self.start_gather()
        if self.pending is not None:
            self.pending.wait()
            self.pending = None

    @torch.no_grad()
    def add_grad(self, param: torch.Tensor, offset: int) -> bool:
        """Move one parameter's fresh gradient into the unit's full gradient buffer and free it;
        True when the unit's last parameter has arrived."""
        if self.grad_buffer is None:
            self.grad_buffer = torch.zeros(
                self.flat.padded, dtype=param.dtype, device=param.device
            )
        self.grad_buffer[offset : offset + param.numel()].add_(param.grad.reshape(-1))
        param.grad = None
        self.arrived += 1
        return self.arrived == len(self.flat.params)

    @torch.no_grad()
    def start_reduce(self) -> None:
        """Start the reduce-scatter (SUM) of the full gradient buffer over the shard group,
        asynchronously (async_op=True: backward goes on computing the next units meanwhile); the
        buffer stays alive until `finish_reduce`."""
        out = torch.empty_like(self.grad_shard)
        work = dist.reduce_scatter_tensor(
            out, self.grad_buffer, group=self.group, async_op=True
        )
        self.reducing = (work, out, self.grad_buffer)
        self.grad_buffer, self.arrived = None, 0

    @torch.no_grad()
    def finish_reduce(self) -> None:
        """Wait for the reduce-scatter; under HSDP all-reduce (SUM) the shard over the replicas
        (the ranks holding the same shard); add its mean over every rank that contributed to the
        gradient shard (divided now, as DDP averages each micro-batch: the same bits for any N)
        and drop the buffer."""
        work, out, _ = self.reducing
        work.wait()
        if self.replicate_group is not None:
            dist.all_reduce(out, group=self.replicate_group)
        self.grad_shard.add_(out.div_(self.contributors))
        self.reducing = None

    def reduce_grads(self) -> None:
        """Both at once: the reduce-scatter, waited for."""
        self.start_reduce()
        self.finish_reduce()
