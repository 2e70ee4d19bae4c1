"""Lab 5 harness: the student's gather, discard and forward prefetch inside our ZeRO-3.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.labs.zero3 --student zero3_student.py --part parity

The student's file defines
    gather(unit, async_op=False)   allocate the unit's full buffer and all-gather the shards into it
    discard(unit)                  free the full buffer (its storage back to zero bytes)
    before_forward(opt, unit)      the forward pre-hook: the unit's weights, and the next unit's prefetch
Our `Zero3AdamW` runs with them (one unit per block, the root resharded too, forward prefetch on).
Parts: `parity` (5 steps against DDP with the same AdamW, fp32, every sum in rank order: 0.0 for a
correct solution), `memory` (the most bytes of full
parameters allocated at any event of a step, and the bytes kept between steps), `traffic` (bus
elements per collective of one step), `order` (the events of one step: when each gather was
issued, when each unit's forward computed).
"""
from functools import partial

import torch

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
CONFIG = GPTConfig(vocab=100, hidden=64, layers=4, heads=4, seq_len=32)
LR, STEPS, BATCH = 1e-3, 5, 4


def student_classes(student):
    """Our Unit and Zero3AdamW with the student's functions in place of ours."""

    class StudentUnit(Unit):
        def start_gather(self):
            if self.gathered or self.pending is not None:
                return
            self.log("gather issued", self)
            self.pending = call_student(student, "gather", self, True)
            if self.pending is None:  # a synchronous gather: nothing to wait for
                self.pending = Done()

        def free(self):
            call_student(student, "discard", self)

    class StudentZero3(Zero3AdamW):
        def before_forward(self, unit):
            call_student(student, "before_forward", self, unit)
            self.log("compute", unit)

    return StudentUnit, StudentZero3


def build(student, model):
    unit_cls, zero_cls = student_classes(student)
    return zero_cls(model, unit_types=(Block,), lr=LR, weight_decay=0.01, reshard_root=True,
                    prefetch=Prefetch(forward=True), unit_cls=unit_cls)


def train(method: str, student, me: zb.Rank, steps: int = STEPS):
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


def parity(student, me: zb.Rank) -> dict:
    with ordered_sums():
        reference, _ = train("ddp", student, me)
        model, zero = train("zero3", student, me)
    zero.gather_all()
    return {"diff": (flat_weights(model) - flat_weights(reference)).abs().max().item(),
            "weight_scale": flat_weights(reference).abs().max().item()}


def memory(student, me: zb.Rank) -> dict:
    _, zero = train("zero3", student, me, steps=2)
    units = {u.name: u.full_bytes for u in zero.units}
    return {"peak": peak(zero.events), "units": units, "world_size": me.world_size,
            "persistent": measure.unique_bytes(zero.persistent_tensors()),
            "padded": sum(u.flat.padded for u in zero.units), "runs": len(zero.runs)}


def traffic(student, me: zb.Rank) -> dict:
    model, zero = train("zero3", student, me, steps=1)
    with CommMeter() as meter:
        one_step("zero3", model, zero, me, 1)
    sent = {op: e.get("bus_bytes", e["bytes"]) / 4 for op, e in meter.summary().items()}
    return {"sent": sent, "padded": sum(u.flat.padded for u in zero.units)}


def order(student, me: zb.Rank) -> dict:
    _, zero = train("zero3", student, me, steps=2)
    return {"events": [(e.what, e.unit) for e in zero.events],
            "blocks": [u.name for u in zero.units if u.name != "root"]}


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    student = load_student(cli.student)
    parts = {"parity": parity, "memory": memory, "traffic": traffic, "order": order}
    zb.report(**parts[cli.part](student, me))


if __name__ == "__main__":
    main()
