"""ZeRO-3 (FSDP): shard the parameters too — gather each unit just before it runs, free it after.

    zero = Zero3AdamW(model, unit_types=(Block,), lr=1e-3)   # hooks on the model; its code unchanged
    loss.backward(); zero.step(); zero.zero_grad()
    zero = Zero3(model, (Block,), torch.optim.SGD, lr=0.1, momentum=0.9)   # any torch.optim class

The model is cut into units (each module of `unit_types`, and the root for what is left). A rank
keeps, for every unit, its 1/N shard of the 16-bit weights, of the gradient and of the fp32
master, momentum and variance: 16Ψ/N bytes. Around each unit's forward: all-gather, compute, free.
Before its backward: all-gather again (the root, whose weights backward needs at once, is kept by
default: FSDP2's `reshard_after_forward=False` for the root); after it, reduce-scatter the
gradients and free both. Traffic per rank: 3Ψ(N-1)/N elements per step, 1.5x DDP
(Rajbhandari et al. 2020, P_os+g+p; Zhao et al. 2023).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from zerobook.train.precision import param_groups
from zerobook.zero.master import MasterShard
from zerobook.zero.prefetch import Prefetch, orders, prefetch_after
from zerobook.zero.timeline import Event, ProfilerSpans
from zerobook.zero.units import Unit, in_backward, wrap_policy


class Zero3(MasterShard):
    """Any torch.optim optimizer over a model whose parameters, gradients and optimizer state are
    all sharded: `optimizer_class(groups, **optimizer_options)` steps each rank's fp32 master
    shards (one tensor per run of a parameter group), as FSDP lets any optimizer step its shards.
    Each unit keeps its own dtype (an fp32 norm in the root beside bf16 blocks, say).

    Options: `group` (the ranks that shard among themselves), `replicate_group` (HSDP: the ranks
    of the other groups that hold the same shard: gradients are all-reduced over them after the
    reduce-scatter), `prefetch` (a `Prefetch`: what to gather ahead), `reduce_limit` (reduce-scatters
    left in flight while backward goes on, 1 as FSDP2; 0: each waited for at once), `reshard_root` (free the root after
    forward too), `offload="cpu"` (ZeRO-Offload: the master and the optimizer in host memory),
    `recompute_aware=False` (the naive hooks the checkpointing chapter measures), `unit_cls` (a
    Unit subclass: the labs' hook point). Hook points a subclass may replace: `before_forward`;
    `log` records an event."""

    def __init__(
        self,
        model: torch.nn.Module,
        unit_types: tuple = (),
        optimizer_class=torch.optim.AdamW,
        *,
        groups=None,
        group=None,
        replicate_group=None,
        prefetch: Prefetch = Prefetch(),
        reshard_root: bool = False,
        offload=None,
        recompute_aware: bool = True,
        unit_cls=Unit,
        reduce_limit: int = 1,
        **optimizer_options,
    ):
        self.group, self.world_size = group, dist.get_world_size(group)
        self.units = [
            unit_cls(name, params, group, log=self.log, replicate_group=replicate_group)
            for name, params in wrap_policy(model, unit_types)
        ]
        self.reshard = {u.name: u.name != "root" or reshard_root for u in self.units}
        self.recompute_aware = recompute_aware
        self.offload = None if offload is None else torch.device(offload)
        self.prefetch = prefetch
        self.reduce_limit, self.reducing, self._finish_queued = reduce_limit, [], False
        self.forward_order, self.backward_order = orders(self.units)
        self.events: list[Event] = []  # the timeline
        self.spans = ProfilerSpans()  # for a Chrome trace
        groups = param_groups(groups or model.parameters())
        self.build_master(
            torch.cat([u.shard.float() for u in self.units]),
            self._runs(groups),
            groups,
            optimizer_class,
            **optimizer_options,
        )
        if self.offload is None:
            self._share_master()
        self._install(model, unit_types)

    def _share_master(self) -> None:
        """An fp32 unit's shard becomes a view of the master, which the optimizer updates in place
        (16 bytes per element of the shard, as FSDP2 keeps, rather than 20); a 16-bit unit keeps
        its own shard, copied from the master after each step."""
        offset = 0
        for unit in self.units:
            if unit.shard.dtype == self.master.dtype:
                unit.shard = self.master[offset : offset + unit.shard.numel()]
            offset += unit.shard.numel()

    def _runs(self, groups: list[dict]) -> list[tuple[int, int, int]]:
        """(start, stop, group index) of every unit's shard, in the concatenated shard."""
        label = {id(p): index for index, g in enumerate(groups) for p in g["params"]}
        runs, offset = [], 0
        for unit in self.units:
            labels = [label[id(p)] for p in unit.flat.params]
            runs += [
                (offset + a, offset + b, i)
                for a, b, i in unit.flat.shard_segments(unit.rank, labels)
            ]
            offset += unit.shard.numel()
        return runs

    def _install(self, model: torch.nn.Module, unit_types: tuple) -> None:
        """Forward pre/post hooks on each unit's module; a post-accumulate-grad hook per parameter."""
        modules = {
            "root": model,
            **{
                n: m
                for n, m in model.named_modules()
                if n and isinstance(m, unit_types)
            },
        }
        for unit in self.units:
            module = modules[unit.name]
            module.register_forward_pre_hook(
                lambda m, args, unit=unit: self.before_forward(unit)
            )
            module.register_forward_hook(
                lambda m, args, out, unit=unit: self._after_forward(unit, out)
            )
            for param, offset in zip(unit.flat.params, unit.flat.offsets):
                param.register_post_accumulate_grad_hook(
                    lambda p, unit=unit, offset=offset: self._on_grad(unit, p, offset)
                )

    def log(self, what: str, unit: Unit) -> None:
        """Record an event of the timeline, with the bytes of full parameters allocated right now
        (and open or close the phase's profiler range)."""
        gathered = sum(u.flat.flat.untyped_storage().nbytes() for u in self.units)
        self.events.append(Event(time.perf_counter(), what, unit.name, gathered))
        self.spans.on(what, unit.name)

    def before_forward(self, unit: Unit) -> None:
        """The unit's forward pre-hook: gather it (a forward run inside backward is activation
        checkpointing's recomputation: no forward prefetch then, the next unit in forward order is
        done), and prefetch what comes next. A lab replaces this hook."""
        recompute = in_backward()
        self.log("gather (recompute)" if recompute else "gather", unit)
        unit.wait_gather()
        if self.prefetch.forward and not recompute:
            prefetch_after(unit, self.forward_order, self.prefetch, self.log)
        self.log("compute", unit)

    def _after_forward(self, unit: Unit, output) -> None:
        """Free the unit (unless kept, or recomputed in backward, whose gradients need it next),
        and hook its output so backward gathers it again first."""
        self.log("computed", unit)
        if self.reshard[unit.name] and not (self.recompute_aware and in_backward()):
            unit.free()
        outputs = output if isinstance(output, (tuple, list)) else [output]
        tensors = [t for t in outputs if torch.is_tensor(t) and t.requires_grad]
        if tensors:
            tensors[0].register_hook(
                lambda grad, unit=unit: self._before_backward(unit)
            )

    def _before_backward(self, unit: Unit) -> None:
        self.log("gather (backward)", unit)
        unit.wait_gather()
        if self.prefetch.backward == "pre":
            prefetch_after(unit, self.backward_order, self.prefetch, self.log)
        self.log("backward", unit)

    def _on_grad(self, unit: Unit, param: torch.Tensor, offset: int) -> None:
        """A gradient of `unit` is ready; after its last one, start its reduce-scatter (async), free
        the unit, prefetch ("post"), and wait for the reduce-scatters beyond `reduce_limit` in
        flight; the end of backward waits for the rest (an autograd engine callback)."""
        if unit.add_grad(param, offset):
            self.log("reduce-scatter", unit)
            unit.start_reduce()
            self.reducing.append(unit)
            if (
                not self._finish_queued
            ):  # the first of this backward: finish them all at its end
                torch.autograd.Variable._execution_engine.queue_callback(
                    self.finish_reduces
                )
                self._finish_queued = True
            unit.free()
            if (
                self.prefetch.backward == "post" and unit.name != "root"
            ):  # the root ends backward
                prefetch_after(unit, self.backward_order, self.prefetch, self.log)
            while len(self.reducing) > self.reduce_limit:
                self._finish_oldest()

    def _finish_oldest(self) -> None:
        unit = self.reducing.pop(0)
        unit.finish_reduce()
        self.log("reduced", unit)

    def finish_reduces(self) -> None:
        """Wait for every reduce-scatter in flight (the end of backward calls it)."""
        while self.reducing:
            self._finish_oldest()
        self._finish_queued = False

    def shard_grads(self) -> torch.Tensor:
        """Every unit's gradient shard (reduce-scattered and averaged in backward, each in its own
        dtype, as DDP averages each gradient), concatenated (in fp32 when the dtypes differ)."""
        self.finish_reduces()  # normally done already, at the end of backward
        return torch.cat([u.grad_shard for u in self.units])

    @torch.no_grad()
    def step(self) -> None:
        """The optimizer on this rank's fp32 shards, copied into the 16-bit shards (the next
        forward gathers them)."""
        self.update_master()
        self._publish_master()

    @torch.no_grad()
    def _publish_master(self) -> None:
        """Copy the fp32 master into the units' 16-bit shards (fp32 units: themselves, a no-op),
        freeing whatever is gathered: it holds the old weights."""
        offset = 0
        for unit in self.units:
            if unit.pending is not None:
                unit.wait_gather()  # a gather in flight must land before its buffer is freed
            unit.free()
            unit.shard.copy_(self.master[offset : offset + unit.shard.numel()])
            offset += unit.shard.numel()

    def shard_state_dict(self) -> dict:
        """This rank's part of a checkpoint: its fp32 master shard and the optimizer's state of it
        (each rank saves its own; no collective). Load it with the same world size."""
        return {
            "world_size": self.world_size,
            "master": self.master.detach().cpu().clone(),
            "optimizer": self.inner.state_dict(),
        }

    @torch.no_grad()
    def load_shard_state_dict(self, state: dict) -> None:
        """Restore this rank's master shard and optimizer state, then the 16-bit shards from it."""
        if state["world_size"] != self.world_size:
            raise ValueError(
                f"a checkpoint of {state['world_size']} shards cannot be loaded on "
                f"{self.world_size} ranks (our flat shards are cut per world size; DCP reshards)"
            )
        self.master.copy_(state["master"])
        self.inner.load_state_dict(state["optimizer"])
        self._publish_master()

    def zero_grad(self, set_to_none: bool = False) -> None:
        for unit in self.units:
            unit.grad_shard.zero_()

    def gather_all(self) -> None:
        """Gather every unit (to read or save the full model; training frees them again)."""
        for unit in self.units:
            unit.wait_gather()

    def offloaded_tensors(self):
        """What ZeRO-Offload keeps in the host's memory: the fp32 master and AdamW's state."""
        yield from self.state_tensors()

    def resident_tensors(self):
        """What stays beside the model (on its device): the 16-bit shards and gradient shards."""
        for unit in self.units:
            yield unit.shard
            yield unit.grad_shard

    def persistent_tensors(self):
        """Everything this rank keeps between steps: 16-bit shards, gradient shards, optimizer."""
        yield from self.resident_tensors()
        yield from self.offloaded_tensors()


class Zero3AdamW(Zero3):
    """Mixed-precision AdamW over a model whose parameters, gradients and states are all sharded:
    the course's ZeRO-3 (`Zero3` with torch.optim.AdamW)."""

    def __init__(
        self,
        model: torch.nn.Module,
        unit_types: tuple = (),
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        **options,
    ):
        super().__init__(
            model,
            unit_types,
            torch.optim.AdamW,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            **options,
        )
