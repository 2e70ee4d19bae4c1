"""ZeRO-3 (FSDP): shard the parameters too — gather each unit just before it runs, free it after.

    zero = Zero3AdamW(model, unit_types=(Block,), lr=1e-3)   # hooks on the model; its code unchanged
    loss.backward(); zero.step(); zero.zero_grad()

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

from zerobook.measure import optimizer_tensors
from zerobook.precision import param_groups
from zerobook.zero.stage1 import clip_shards_, step_pieces
from zerobook.zero.units import Unit, wrap_policy


class Zero3AdamW:
    """Mixed-precision AdamW over a model whose parameters, gradients and states are all sharded."""

    def __init__(self, model: torch.nn.Module, unit_types: tuple = (), lr: float = 1e-3, betas=(0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01, groups=None, group=None,
                 reshard_root: bool = False):
        self.group, self.world_size = group, dist.get_world_size(group)
        self.units = [Unit(name, params, group) for name, params in wrap_policy(model, unit_types)]
        self.reshard = {u.name: u.name != "root" or reshard_root for u in self.units}
        self.events: list[tuple[float, str, str]] = []  # (seconds, what, unit): the timeline
        self.master = torch.cat([u.shard for u in self.units]).float()
        self.master_grad = None
        self.inner = torch.optim.AdamW(self._shard_groups(param_groups(groups or model.parameters())),
                                       lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self._install(model, unit_types)

    def _shard_groups(self, groups: list[dict]) -> list[dict]:
        """The inner AdamW's groups: each run of each unit's shard, with its group's options."""
        label = {id(p): index for index, g in enumerate(groups) for p in g["params"]}
        out, self.pieces, self.runs, offset = [{**g, "params": []} for g in groups], [], [], 0
        for unit in self.units:
            for a, b, index in unit.flat.shard_segments(unit.rank, [label[id(p)] for p in unit.flat.params]):
                self.runs.append((offset + a, offset + b))
                self.pieces.append(torch.nn.Parameter(self.master[offset + a:offset + b]))
                out[index]["params"].append(self.pieces[-1])
            offset += unit.shard.numel()
        return [g for g in out if g["params"]]

    def _install(self, model: torch.nn.Module, unit_types: tuple) -> None:
        """Forward pre/post hooks on each unit's module; a post-accumulate-grad hook per parameter."""
        modules = {"root": model, **{n: m for n, m in model.named_modules() if n and isinstance(m, unit_types)}}
        for unit in self.units:
            module = modules[unit.name]
            module.register_forward_pre_hook(lambda m, args, unit=unit: self._before_forward(unit))
            module.register_forward_hook(lambda m, args, out, unit=unit: self._after_forward(unit, out))
            for param, offset in zip(unit.flat.params, unit.flat.offsets):
                param.register_post_accumulate_grad_hook(
                    lambda p, unit=unit, offset=offset: self._on_grad(unit, p, offset))

    def _log(self, what: str, unit: Unit) -> None:
        self.events.append((time.perf_counter(), what, unit.name))

    def _before_forward(self, unit: Unit) -> None:
        self._log("gather", unit)
        unit.wait_gather()
        self._log("compute", unit)

    def _after_forward(self, unit: Unit, output) -> None:
        """Free the unit (unless kept), and hook its output so backward gathers it again first."""
        self._log("computed", unit)
        if self.reshard[unit.name]:
            unit.free()
        outputs = output if isinstance(output, (tuple, list)) else [output]
        tensors = [t for t in outputs if torch.is_tensor(t) and t.requires_grad]
        if tensors:
            tensors[0].register_hook(lambda grad, unit=unit: self._before_backward(unit))

    def _before_backward(self, unit: Unit) -> None:
        self._log("gather (backward)", unit)
        unit.wait_gather()
        self._log("backward", unit)

    def _on_grad(self, unit: Unit, param: torch.Tensor, offset: int) -> None:
        """A gradient of `unit` is ready; after its last one, reduce-scatter and free the unit."""
        if unit.add_grad(param, offset):
            self._log("reduce-scatter", unit)
            unit.reduce_grads()
            unit.free()
            self._log("reduced", unit)

    @torch.no_grad()
    def reduced_grad(self) -> torch.Tensor:
        """This rank's averaged fp32 gradient shard of every unit, concatenated (Ψ/N elements)."""
        if self.master_grad is None:
            self.master_grad = torch.cat([u.grad_shard for u in self.units]).float() / self.world_size
            for piece, (a, b) in zip(self.pieces, self.runs):
                piece.grad = self.master_grad[a:b]
        return self.master_grad

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Clip by the global norm: squares summed per shard, all-reduced (SUM), square-rooted."""
        return clip_shards_(self.reduced_grad(), max_norm, self.group)

    @torch.no_grad()
    def step(self) -> None:
        """AdamW on this rank's fp32 shards, copied into the 16-bit shards (the next forward gathers)."""
        self.reduced_grad()
        step_pieces(self.inner, self.pieces)
        self.master_grad = None
        offset = 0
        for unit in self.units:
            unit.shard.copy_(self.master[offset:offset + unit.shard.numel()])
            offset += unit.shard.numel()

    def zero_grad(self, set_to_none: bool = False) -> None:
        for unit in self.units:
            unit.grad_shard.zero_()

    def gather_all(self) -> None:
        """Gather every unit (to read or save the full model; training frees them again)."""
        for unit in self.units:
            unit.wait_gather()

    def state_tensors(self):
        """What this rank keeps for the optimizer: its fp32 shards and AdamW's state of them."""
        yield self.master
        yield from optimizer_tensors(self.inner)

    def persistent_tensors(self):
        """Everything this rank keeps between steps: 16-bit shards, gradient shards, optimizer."""
        for unit in self.units:
            yield unit.shard
            yield unit.grad_shard
        yield from self.state_tensors()
