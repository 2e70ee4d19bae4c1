"""Lab 5's record of a run, on each rank: which unit each collective carried, and what the
student's object holds between steps (zerobook.labs.zero3 reports it).

A unit's collectives are told apart by their input, in any order: an all-gather holds this
rank's pieces of the unit's parameters, a reduce-scatter its full gradients, padded. A
reduce-scatter whose gradients are no unit's (weights gone wrong earlier: NaN) is the unit
whose backward had just finished, if its size is that unit's: a mistake upstream does not
make the traffic wrong too.
"""

from typing import ClassVar

import torch
import torch.nn.functional as F

from zerobook.train import measure
from zerobook.labs import student_state
from zerobook.labs.freed import FreedStorage, freed

# PyTorch's FSDP and DTensor: torch itself imports them (AdamW imports torch._dynamo),
# so only the student's file is refused them, and the run checks the model for them
TORCH_FORBIDDEN = ("torch.distributed.fsdp", "torch.distributed.tensor")
HELD = ("all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce")


class RecordedAdamW(torch.optim.AdamW):
    """torch's AdamW; each one made is noted, so the harness can read its groups."""

    made: ClassVar[list] = []

    def __init__(self, params, *args, **options):
        super().__init__(params, *args, **options)
        RecordedAdamW.made.append(self)
        self.register_step_pre_hook(RecordedAdamW.unfreed)  # not step(): torch wraps it

    @staticmethod
    def unfreed(optimizer, args, kwargs) -> None:
        """Its step pre-hook: no tensor it updates may have had its storage freed."""
        for group in optimizer.param_groups:
            for param in group["params"]:
                if freed(param):
                    raise FreedStorage(
                        "your optimizer's step would update a tensor whose storage "
                        "your code freed (the full parameter itself?): build the "
                        "optimizer over your pieces, which stay allocated"
                    )


def pieces(tensor: torch.Tensor, world_size: int) -> tuple:
    """The N pieces of `tensor`, flattened and zero-padded to a multiple of N."""
    flat = tensor.detach().reshape(-1)
    return F.pad(flat, (0, -flat.numel() % world_size)).chunk(world_size)


def torch_fsdp_used(model) -> list[str]:
    """The model's modules or parameters that FSDP or DTensor made (or replaced)."""
    things = [*model.modules(), *model.parameters()]
    return sorted(
        {
            type(t).__module__
            for t in things
            if type(t).__module__.startswith(TORCH_FORBIDDEN)
        }
    )


def layout(initial: dict, me, names: dict) -> dict:
    """Each parameter -> the optimizer tensor equal to its piece r (the layout), and the
    optimizer's tensors that are no parameter's piece r. FreedStorage if the optimizer
    holds a tensor whose storage was freed (`names`: id of a parameter -> its name)."""
    masters = [
        p for opt in RecordedAdamW.made for g in opt.param_groups for p in g["params"]
    ]
    for master in masters:
        if freed(master):
            what = names.get(id(master))
            raise FreedStorage(
                f"your optimizer was given {what}, the full parameter itself, whose "
                "storage your code freed: build the optimizer over your pieces (piece r "
                "of each parameter, kept as an fp32 master)"
                if what
                else "your optimizer holds a tensor whose storage your code freed: "
                "build it over your pieces"
            )
    found, used = {}, set()
    for name, weight in initial.items():
        piece = pieces(weight, me.world_size)[me.rank]
        match = next((i for i, m in enumerate(masters) if same(m, piece)), None)
        if match is not None:
            found[name] = match
            used.add(match)
    extra = [m.numel() for i, m in enumerate(masters) if i not in used]
    return {"found": found, "extra": extra, "masters": masters}


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    a = a.detach().reshape(-1)
    return a.numel() == b.numel() and torch.equal(a.to(b.dtype), b)


def owner(tensor, by_unit: dict, world_size: int | None = None):
    """The one unit whose values `tensor` holds (in any order, NaN matching NaN), or
    None; with `world_size`, also those values divided by it (gradients averaged before
    the reduce-scatter sums them)."""
    values = tensor.reshape(-1).float().sort().values
    scales = [lambda t: t]
    if world_size:
        scales += [lambda t: t / world_size, lambda t: t * (1 / world_size)]
    found = {
        unit
        for unit, expected in by_unit.items()
        for scale in scales
        if expected.numel() == values.numel()
        and torch.equal(scale(expected).isnan(), values.isnan())
        and torch.equal(scale(expected).nan_to_num(0.0), values.nan_to_num(0.0))
    }
    return found.pop() if len(found) == 1 else None


def step_events(flight, start, first, watch, found, masters, me) -> list:
    """The step's events, held collectives numbered from 0 and named by their unit, and
    whether their input was finite."""

    def sorted_cat(tensors):
        return torch.cat([t.reshape(-1).float() for t in tensors]).sort().values

    ranks = me.world_size
    mine = {  # this rank's pieces of each unit, from its master pieces
        u: sorted_cat(masters[found[watch.names[id(p)]]] for p in params)
        for u, params in watch.units.items()
        if all(watch.names[id(p)] in found for p in params)
    }
    grads = {  # this rank's full gradients of each unit, padded
        u: sorted_cat(
            torch.cat(pieces(watch.grads[watch.names[id(p)]], ranks)) for p in params
        )
        for u, params in watch.units.items()
        if all(watch.names[id(p)] in watch.grads for p in params)
    }
    events, done = [], None  # the unit whose backward finished last
    for event in flight.events[start:]:
        name, *rest = event
        if name in HELD:
            tensor = flight.inputs[rest[0]]
            gather = name == HELD[0]
            unit = owner(tensor, *((mine,) if gather else (grads, me.world_size)))
            if unit is None and name == HELD[1] and done in grads:
                fits = grads[done].numel() == tensor.numel()
                unit = done if fits and not tensor.isfinite().all() else None
            finite = bool(tensor.isfinite().all())
            events.append(
                [name, rest[0] - first, rest[1], unit, tensor.numel(), finite]
            )
        elif name == "backward done":
            done = rest[0]
            events.append(event)
        elif name == "wait":
            events.append(["wait", rest[0] - first])
        else:
            events.append(event)
    return events


def kept(zero, student, watch, masters: list) -> dict:
    """Bytes held after step(): the master pieces, their grads, the optimizer's state, the
    full parameters (per unit) and gradients, and any other tensor the student's object and
    file hold (zerobook.labs.student_state)."""
    seen: set = set()
    states = [t for o in RecordedAdamW.made for t in measure.own_optimizer_tensors(o)]
    out = {
        "masters": measure.unique_bytes(masters, seen),
        "master grads": measure.unique_bytes(
            [m.grad for m in masters if m.grad is not None], seen
        ),
        "state": measure.unique_bytes([t for t in states if torch.is_tensor(t)], seen),
        "counters": len(masters),
        "full parameters": watch.allocated(),
        "full gradients": {
            watch.names[id(p)]: p.grad.untyped_storage().nbytes()
            for p in watch.model.parameters()
            if p.grad is not None
        },
    }
    seen |= {measure.storage_key(p) for p in watch.model.parameters()}
    seen |= watch.own_buffers  # the model's, from before the student's code ran
    held = student_state.tensors([zero], student, watch.model, grads=True)
    out["other"] = measure.unique_bytes(held, seen)
    return out
