"""PyTorch's FSDP2 (`fully_shard`) as the course sets it up beside its own ZeRO-3, and what both
are measured by: the bytes a rank keeps, and the full weights.

    shard_blocks(model, me, dtype=torch.bfloat16)   # one unit per block, then the root
    kept_bytes(model, optimizer)                    # ours or FSDP2's, storages counted once
    full_weights(model, optimizer)                  # every weight whole (collective), flat fp32
    loss, meter, kept = measured_step(model, optimizer, tokens, reduce)   # one step, metered
    names = fsdp_ranges(profiler)                   # FSDP2's own profiler ranges, in order
    all_gather_order(names), peak_gathered(names, unit_bytes)   # which unit, when, how many at once
    traced_step(model, batch)                       # a step's all-gathers in order, bytes, the peak
    unsharded_grad_bytes(model)                     # gradients FSDP2 holds unsharded (no sync)
"""

from __future__ import annotations

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.profiler import ProfilerActivity, profile

from zerobook.train import measure
from zerobook.data_parallel.comm import CommMeter
from zerobook.train.models import next_token_loss
from zerobook.zero import Zero3


def mesh_of(me):
    """A 1-D device mesh over every rank, on the ranks' device type (cpu with gloo, cuda with NCCL)."""
    return init_device_mesh(me.device.split(":")[0], (me.world_size,))


def shard_blocks(model, me, dtype=torch.float32, blocks=None, **options) -> None:
    """fully_shard every block (`model.blocks` unless `blocks` says which modules), then the root
    (FSDP2's usual wrapping: one unit per block); in 16 bits, compute and reduce-scatter in
    `dtype` (MixedPrecisionPolicy) while FSDP2 keeps the fp32 shard. `options` go to every
    fully_shard (reshard_after_forward, ...)."""
    if dtype != torch.float32:
        options["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=dtype, reduce_dtype=dtype
        )
    mesh = mesh_of(me)
    for module in [*(model.blocks if blocks is None else blocks), model]:
        fully_shard(module, mesh=mesh, **options)


def local(tensor):
    """A DTensor's shard on this rank (a plain tensor as it is)."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def kept_bytes(model, optimizer) -> int:
    """Bytes of weights, gradients and optimizer state this rank holds after a step (our ZeRO-3's
    persistent tensors, or the local shards of FSDP2's DTensors), each storage counted once."""
    if isinstance(optimizer, Zero3):
        return measure.unique_bytes(optimizer.persistent_tensors())
    tensors = [local(p) for p in model.parameters()] + [
        local(p.grad) for p in model.parameters()
    ]
    return measure.unique_bytes(
        tensors + [local(t) for t in measure.optimizer_tensors(optimizer)]
    )


def full_weights(model, optimizer, dtype=None) -> torch.Tensor:
    """Every weight whole (our ZeRO-3 gathers its units; FSDP2's DTensors give full_tensor()), as
    one flat fp32 CPU tensor; with `dtype`, rounded to it first, as the forward uses them."""
    if isinstance(optimizer, Zero3):
        optimizer.gather_all()
    tensors = [
        p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()
    ]
    return torch.cat(
        [t.detach().to(dtype or t.dtype).float().reshape(-1).cpu() for t in tensors]
    )


def measured_step(model, optimizer, tokens, reduce=None):
    """One training step with its collectives counted: forward, backward, `reduce(model)` if given
    (DDP's all-reduce; ZeRO-3 and FSDP2 reduce-scatter in backward), the optimizer's step. Returns
    (loss tensor, the CommMeter of the step, kept_bytes after the step); zero_grad follows."""
    with CommMeter() as meter:
        loss = next_token_loss(model, tokens)
        loss.backward()
        if reduce is not None:
            reduce(model)
        optimizer.step()
    kept = kept_bytes(model, optimizer)
    optimizer.zero_grad()
    return loss, meter, kept


def fsdp_ranges(profiler) -> list[str]:
    """FSDP2's own torch.profiler ranges ("FSDP::all_gather (blocks.0)", ...) of a profiled
    region, in the order they opened (an enclosing range before the ranges inside it)."""
    events = [e for e in profiler.events() if e.name.startswith("FSDP::")]
    events.sort(key=lambda e: (e.time_range.start, -e.time_range.end))
    return [e.name for e in events]


def unit_of(name: str) -> str:
    """The unit a range names: "FSDP::all_gather (blocks.0)" -> "blocks.0"; the root's ranges
    carry no name or "()" -> "root"; "FSDP::backward_prefetch for blocks.1" -> "blocks.1"."""
    if " for " in name:
        return name.split(" for ", 1)[1]
    inside = name.partition(" (")[2].rstrip(")")
    return inside or "root"


def phase_of(name: str) -> str:
    """What a range is: "all_gather", "pre_forward", "post_backward_reshard", ..."""
    return name.removeprefix("FSDP::").split(" ", 1)[0]


def all_gather_order(names) -> list[dict]:
    """Every all-gather of `names` (fsdp_ranges), in order: the unit gathered, the pass
    ("forward" until the first pre_backward), the unit whose hook issued it, and whether it was
    a prefetch (issued for a unit other than the one about to run)."""
    order, issuer, phase, prefetch = [], None, "forward", False
    for name in names:
        what = phase_of(name)
        if what in ("pre_forward", "pre_backward"):
            issuer, prefetch = unit_of(name), False
            phase = "backward" if what == "pre_backward" else phase
        elif what.endswith("_prefetch"):
            prefetch = True
        elif what == "all_gather":
            order.append(
                {
                    "unit": unit_of(name),
                    "pass": phase,
                    "by": issuer,
                    "prefetch": prefetch,
                }
            )
            prefetch = False
    return order


def peak_gathered(names, unit_bytes: dict) -> int:
    """Largest sum of `unit_bytes` gathered at once: a unit counts from its all-gather to its
    reshard (post_backward_reshard; post_forward when it is gathered again later, in backward)."""
    last_gather = {
        unit_of(n): i for i, n in enumerate(names) if phase_of(n) == "all_gather"
    }
    held, peak = set(), 0
    for i, name in enumerate(names):
        what, unit = phase_of(name), unit_of(name)
        if what == "all_gather":
            held.add(unit)
        elif what == "post_backward_reshard" or (
            what == "post_forward" and last_gather.get(unit, -1) > i
        ):
            held.discard(unit)
        peak = max(peak, sum(unit_bytes[u] for u in held))
    return peak


def traced_step(model, batch, steps: int = 2) -> dict:
    """`steps` forward and backward passes of `batch(step)`'s tokens, the last metered and profiled
    (the first initialises FSDP2): its all-gathers in order (all_gather_order), each unit's bytes,
    the most gathered at once (peak_gathered), the reduce-scatters."""
    for step in range(steps):
        with CommMeter() as meter, profile(activities=[ProfilerActivity.CPU]) as prof:
            next_token_loss(model, batch(step)).backward()
    names = fsdp_ranges(prof)
    order = all_gather_order(names)
    gathers = [e.bytes for e in meter.events if e.op == "all_gather_into_tensor"]
    unit_bytes = {o["unit"]: size for o, size in zip(order, gathers, strict=True)}
    return {
        "order": order,
        "unit_bytes": unit_bytes,
        "peak": peak_gathered(names, unit_bytes),
        "all_gathers": len(gathers),
        "gathered_bytes": sum(gathers),
        "reduce_scatters": meter.summary()["reduce_scatter_tensor"]["calls"],
    }


def unsharded_grad_bytes(model) -> int:
    """Bytes of the unsharded gradients FSDP2 holds between backward passes (read from its
    internals, torch 2.x: each FSDPParam's unsharded parameter's .grad and accumulated grad)."""
    total = 0
    for module in model.modules():
        group = getattr(module, "_get_fsdp_state", lambda: None)()
        for param in getattr(
            getattr(group, "_fsdp_param_group", None), "fsdp_params", []
        ):
            unsharded = getattr(param, "_unsharded_param", None)
            for grad in (
                getattr(unsharded, "grad", None),
                getattr(param, "unsharded_accumulated_grad", None),
            ):
                total += 0 if grad is None else grad.numel() * grad.element_size()
    return total
