"""Lab 5 harness: the student's gather, discard and forward prefetch inside our ZeRO-3.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.labs.zero3 --student zero3_student.py --part parity

The student's file defines
    gather(unit, async_op=False)   allocate the unit's full buffer and all-gather the shards into it
    discard(unit)                  free the full buffer (its storage back to zero bytes)
    before_forward(opt, unit)      the forward pre-hook: the unit's weights, and the next unit's prefetch
Our `Zero3AdamW` runs with them (one unit per block, the root resharded too, forward prefetch on).
Parts: `parity` (5 steps against DDP with the same AdamW, fp32, every sum in rank order: 0.0 for a
correct solution; which units differ), `memory` (the most bytes of full parameters allocated at any
event of a step, and the bytes kept between steps), `traffic` (bus elements per collective of one
step, and how often each unit was gathered), `order` (the events of one step: when each gather
was issued, whether it was still in flight when gather() returned, when it was waited for, when
each unit's forward computed).

Each property is graded on its own as far as the mechanism allows: a unit the student's discard
leaves gathered is named in every report (`kept`) and freed by ours, so only `memory` fails for it;
a gather that returns None with its asynchronous all-gather still running fails at once, saying so.
"""
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

import zerobook as zb
from zerobook import measure
from zerobook.comm import CommMeter
from zerobook.ddp import average_gradients
from zerobook.labs.harness import call_student, load_student, parse_args
from zerobook.models import GPT, Block, GPTConfig
from zerobook.parity import Done, ordered_sums
from zerobook.precision import MixedPrecisionAdamW
from zerobook.training import flat_weights, rank_batch, train_step
from zerobook.zero import Prefetch, Zero3AdamW
from zerobook.zero.timeline import peak
from zerobook.zero.units import Unit

PARTS = ["parity", "memory", "traffic", "order"]
WITHHELD = [
    "zerobook.zero.units:Unit.start_gather",
    "zerobook.zero.units:Unit.free",
    "zerobook.zero.stage3:Zero3.before_forward",
    "zerobook.zero.prefetch:prefetch_after",
]
CONFIG = GPTConfig(vocab=100, hidden=64, layers=4, heads=4, seq_len=32)
LR, STEPS, BATCH = 1e-3, 5, 4


class GatherWatch:
    """The all-gathers a student's `gather` starts, seen from inside: torch.distributed's
    all_gather_into_tensor is wrapped (before the student's file is imported, so a name
    imported from it is the wrapper too); while `watching`, each call is recorded and an
    asynchronous one's handle is returned as a `WatchedWork`, whose wait the unit's
    timeline records."""

    def __init__(self):
        self.calls: list[WatchedWork | None] = []  # None: a blocking call
        self.watching = False
        self.original = dist.all_gather_into_tensor
        for module in (dist, c10d):
            module.all_gather_into_tensor = self.all_gather_into_tensor

    def all_gather_into_tensor(
        self, output_tensor, input_tensor, group=None, async_op=False
    ):
        """torch's, keywords included; recorded while watching."""
        work = self.original(output_tensor, input_tensor, group, async_op)
        if not self.watching:
            return work
        self.calls.append(WatchedWork(work) if async_op else None)
        return self.calls[-1] if async_op else work

    def call(self, student, unit):
        """The student's gather(unit, async_op=True): what it returned, calls seen."""
        self.calls, self.watching = [], True
        try:
            return call_student(student, "gather", unit, True), self.calls
        finally:
            self.watching = False


class WatchedWork:
    """An asynchronous all-gather's handle; `waited` says whether anyone waited for it
    yet, and `on_wait` (the unit's timeline) hears when."""

    def __init__(self, work):
        self.work, self.waited, self.on_wait = work, False, None

    def wait(self, timeout=None):
        self.waited = True
        if self.on_wait is not None:
            self.on_wait()
        return self.work.wait() if timeout is None else self.work.wait(timeout)

    def __getattr__(self, name):
        return getattr(self.work, name)


def in_flight(name: str, returned, calls: list) -> bool:
    """Whether the student's gather of unit `name` returned with its all-gather still in
    flight (False: it finished inside the call, ignoring async_op=True); a forgotten
    handle is an error. A handle the watch did not see (another collective) counts as in
    flight."""
    pending = [work for work in calls if work is not None and not work.waited]
    if returned is None and pending:
        # it writes into the unit's buffer: let it land before the run ends
        for work in pending:
            work.wait()
        raise RuntimeError(
            f"gather({name}, async_op=True) started an asynchronous all-gather but "
            "returned None: return its work handle, which the caller waits on "
            "before the weights are used"
        )
    return returned is not None and (
        not calls or any(work is returned for work in pending)
    )


def watched(handle, on_wait) -> WatchedWork:
    """The handle the student's gather returned, telling `on_wait` when waited on."""
    handle = handle if isinstance(handle, WatchedWork) else WatchedWork(handle)
    handle.on_wait = on_wait
    return handle


def student_classes(student, watch: GatherWatch, kept: dict):
    """Our Unit and Zero3AdamW with the student's functions in place of ours. A unit the student's
    discard leaves gathered is recorded in `kept` (name -> bytes) and freed by ours, so that the
    parts which do not grade the freeing are graded on their own."""

    class StudentUnit(Unit):
        def start_gather(self):
            if self.gathered or self.pending is not None:
                return
            self.log("gather issued", self)
            returned, calls = watch.call(student, self)
            flying = in_flight(self.name, returned, calls)
            self.pending = Done() if returned is None else \
                watched(returned, lambda: self.log("gather waited", self))
            self.log("gather in flight" if flying else "gather done", self)

        def free(self):
            call_student(student, "discard", self)
            if self.gathered:
                kept.setdefault(self.name, self.flat.flat.untyped_storage().nbytes())
                # freed by ours (Unit.free is withheld from the student's code)
                self.flat.flat.untyped_storage().resize_(0)

    class StudentZero3(Zero3AdamW):
        def before_forward(self, unit):
            call_student(student, "before_forward", self, unit)
            self.log("compute", unit)

    return StudentUnit, StudentZero3


@dataclass
class Student:
    """The student's file (`module`), the all-gathers its gather starts (`watch`), and the units
    its discard left gathered (`kept`: name -> bytes)."""

    module: object
    watch: GatherWatch
    kept: dict = field(default_factory=dict)


def build(student: Student, model):
    unit_cls, zero_cls = student_classes(student.module, student.watch, student.kept)
    return zero_cls(model, unit_types=(Block,), lr=LR, weight_decay=0.01, reshard_root=True,
                    prefetch=Prefetch(forward=True), unit_cls=unit_cls)


def train(method: str, student: Student, me: zb.Rank, steps: int = STEPS):
    torch.manual_seed(0)
    model = GPT(CONFIG).to(me.device)
    if method == "ddp":
        optimizer = MixedPrecisionAdamW(model.parameters(), lr=LR, weight_decay=0.01)
    else:
        optimizer = build(student, model)
    for index in range(steps):
        one_step(method, model, optimizer, me, index)
    return model, optimizer


def one_step(method: str, model, optimizer, me: zb.Rank, index: int) -> None:
    tokens = rank_batch(CONFIG, BATCH, index, me)
    if method != "ddp":
        optimizer.events = []
    train_step(model, optimizer, tokens, partial(average_gradients, flat=True) if method == "ddp" else None)


def parity(student: Student, me: zb.Rank) -> dict:
    with ordered_sums():
        reference, _ = train("ddp", student, me)
        model, zero = train("zero3", student, me)
    zero.gather_all()
    return {"diff": (flat_weights(model) - flat_weights(reference)).abs().max().item(),
            "units": unit_diffs(model, reference, zero), "kept": student.kept,
            "weight_scale": flat_weights(reference).abs().max().item()}


def unit_diffs(model, reference, zero) -> dict:
    """Unit -> the largest difference of its weights from DDP's (the units that differ)."""
    theirs = dict(reference.named_parameters())
    name_of = {id(p): n for n, p in model.named_parameters()}
    diffs = {
        u.name: max(
            (p.detach() - theirs[name_of[id(p)]].detach()).abs().max().item()
            for p in u.flat.params
        )
        for u in zero.units
    }
    return {name: diff for name, diff in diffs.items() if diff != 0}


def memory(student: Student, me: zb.Rank) -> dict:
    _, zero = train("zero3", student, me, steps=2)
    units = {u.name: u.full_bytes for u in zero.units}
    return {"peak": peak(zero.events), "units": units, "world_size": me.world_size, "kept": student.kept,
            "persistent": measure.unique_bytes(zero.persistent_tensors()),
            "padded": sum(u.flat.padded for u in zero.units), "runs": len(zero.runs)}


def traffic(student: Student, me: zb.Rank) -> dict:
    model, zero = train("zero3", student, me, steps=1)
    with CommMeter() as meter:
        one_step("zero3", model, zero, me, 1)
    sent = {op: e.get("bus_bytes", e["bytes"]) / 4 for op, e in meter.summary().items()}
    gathers = {u.name: sum(e.what == "gather issued" and e.unit == u.name for e in zero.events)
               for u in zero.units}
    return {"sent": sent, "padded": sum(u.flat.padded for u in zero.units), "gathers": gathers}


def order(student: Student, me: zb.Rank) -> dict:
    _, zero = train("zero3", student, me, steps=2)
    return {"events": [(e.what, e.unit) for e in zero.events],
            "blocks": [u.name for u in zero.units if u.name != "root"]}


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    watch = GatherWatch()  # before the student's file is imported: a name it imports is the wrapper
    student = Student(load_student(cli.student, WITHHELD), watch)
    parts = {"parity": parity, "memory": memory, "traffic": traffic, "order": order}
    zb.report(**parts[cli.part](student, me))


if __name__ == "__main__":
    main()
