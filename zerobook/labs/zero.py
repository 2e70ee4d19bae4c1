"""Lab 4 harness: the student's ZeRO-2 in FSDP2's layout, graded from one run's events.

    python -m torch.distributed.run --standalone --nproc-per-node 3 \
        -m zerobook.labs.zero --student zero_student.py --part train

The student's file defines a class
    Zero2(model, optimizer_class, bucket_cap_bytes, max_in_flight, **options)
    .finish()  .step()  .zero_grad()         after backward, in turn
where rank r owns piece r of every parameter (flattened, zero-padded to a multiple of
N, cut into N equal pieces), and at most max_in_flight reduce-scatters are in flight
(launching one more first retires the oldest). The one part, `train`, builds the course's GPT from one
seed on every rank and trains it STEPS steps with each optimizer of OPTIMIZERS (until a
step fails: the steps before it are still reported, zerobook.labs.crash, and so is the
backward of a step whose step() failed, `stepped` False), every
sum in rank order (zerobook.train.parity), every reduce-scatter and all-gather in flight
until waited on (zerobook.data_parallel.inflight), every collective metered (zerobook.data_parallel.comm). It
reports the master pieces (whose piece each is), the optimizer's bytes, per step the
events in order, the gradients each reduce-scatter's input held (zerobook.labs.zero_probe),
the gradient bytes held at every hook (the pieces' .grad included), what each piece's .grad held after
finish(), the step's traffic; and the weights against one process that sums the same
per-rank gradients in rank order. The graded tests read it (zerobook.labs.zero_events, zero_held).
"""

from functools import partial

import torch
from torch.autograd import grad

import zerobook as zb
from zerobook.train import measure
from zerobook.labs import zero_probe as probe
from zerobook.data_parallel.comm import CommMeter
from zerobook.data_parallel.inflight import InFlight
from zerobook.labs import hints, student_state
from zerobook.labs.crash import Steps
from zerobook.labs.harness import call_student, frozen, lab_params, load_student
from zerobook.labs.harness import parse_args, refuse
from zerobook.train.models import GPT, GPTConfig, next_token_loss, random_batch
from zerobook.train.parity import ordered_sums
from zerobook.train.training import rank_batch

PARTS = ("train",)
# Lab 2's GPT: 39 parameters (the embedding tied to the output layer), 41,376 elements,
# 41,418 once each is padded to a multiple of 3; 8 KiB buckets: 10 of them, at most 2
# in flight, so a rank never holds one full set of gradients (zerobook.labs.zero_held.peak)
CONFIG = GPTConfig(vocab=100, hidden=32, layers=3, heads=4, seq_len=16)
# an instructor's own (zerobook.labs.harness.lab_params)
HIDDEN = lab_params(bucket_cap_bytes=8 * 1024, max_in_flight=2, seed=1234)
BUCKET_CAP_BYTES, MAX_IN_FLIGHT = HIDDEN["bucket_cap_bytes"], HIDDEN["max_in_flight"]
STEPS, BATCH, SEED = 3, 2, HIDDEN["seed"]
OPTIMIZERS = frozen({  # any element-wise torch.optim optimizer: two of them, in one launch
    "AdamW": (torch.optim.AdamW, {"lr": 1e-3, "weight_decay": 0.1}),
    "SGD": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.1}),
})  # fmt: skip


class Arrivals:
    """The harness's post-accumulate-grad hooks, registered before the student's: the
    gradient bytes the student holds, then the arrival (a copy of the gradient)."""

    def __init__(self, model, flight: InFlight):
        self.model, self.params = model, dict(model.named_parameters())
        self.names = {id(p): name for name, p in self.params.items()}
        self.flight, self.grads, self.held = flight, {}, []
        self.student, self.exclude, self.masters = None, set(), []
        # the model's own buffers, before the student's code runs (one it registers is its)
        self.own_buffers = {measure.storage_key(b) for b in model.buffers()}
        for param in self.params.values():
            param.register_post_accumulate_grad_hook(self.arrived)

    def watch(self, student, optimizer, module) -> None:
        """From now on, measure `student` and what its file `module` keeps elsewhere
        (zerobook.labs.student_state); the weights and optimizer state are not grads."""
        self.student, self.module = student, module
        self.masters = [p for group in optimizer.param_groups for p in group["params"]]
        self.optimizer, self.state_keys = optimizer, measure.state_keys(optimizer)
        keys = {measure.storage_key(t) for t in self.params.values()}
        self.exclude = keys | self.own_buffers

    def measure(self, arriving=None) -> None:
        """Bytes of gradients held: the student's tensors (not weights or optimizer
        state), the pieces' .grad and the live param.grads but the arriving one's."""
        kept = [
            n for n, p in self.params.items() if p.grad is not None and n != arriving
        ]
        tensors = [self.params[n].grad for n in kept]
        tensors += [m.grad for m in self.masters if m.grad is not None]
        theirs = student_state.tensors([self.student], self.module, self.model)
        state = probe.optimizer_state(self.optimizer, self.state_keys)  # as it is now
        seen = self.exclude | {measure.storage_key(t) for t in state}
        tensors += theirs
        held = measure.unique_bytes(tensors, seen)
        self.held.append([len(self.flight.events), held, kept, self.buffers(theirs)])

    def buffers(self, tensors) -> list[int]:
        """The reduce-scatters whose input the student still holds: the last one started
        on each storage address the student's tensors have (an address freed and taken
        again belongs to its newest reduce-scatter)."""
        owner = {}
        for event in self.flight.events:
            if event[0] == probe.RS:
                owner[self.flight.buffers[event[1]]] = event[1]
        held = {t.untyped_storage().data_ptr() for t in tensors}
        return sorted(i for address, i in owner.items() if address in held)

    def arrived(self, param) -> None:
        name = self.names[id(param)]
        if self.student is not None:
            self.measure(arriving=name)
        self.flight.note("grad", name)
        self.grads[name] = param.grad.detach().clone()


def model_from(seed: int, me: zb.Rank) -> torch.nn.Module:
    """The GPT from `seed`, its LayerNorms moved off ones and zeros: every parameter's
    pieces differ, so that a master piece's values name the piece it is."""
    torch.manual_seed(seed)
    model = GPT(CONFIG)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 1:
                param.add_(torch.randn_like(param), alpha=0.02)
    return model.to(me.device)


def build(student, model, name: str, arrivals: Arrivals, me: zb.Rank):
    """The student's Zero2 over `model` with optimizer `name`; its optimizer; the master
    pieces, each named by the piece of a parameter it is (zerobook.labs.zero_probe.identify)."""
    optimizer_class, options = OPTIMIZERS[name]
    make = {
        "Zero2": partial(student.Zero2, **options)
    }  # call_student takes no keywords
    args = model, optimizer_class, BUCKET_CAP_BYTES, MAX_IN_FLIGHT
    zero = call_student(type("Student", (), make), "Zero2", *args)
    optimizer = probe.find_optimizer(zero, optimizer_class)
    masters, names = probe.identify(optimizer, model, me)
    arrivals.watch(zero, optimizer, student)
    return zero, (optimizer, names), masters


def numbered(events: list, first: int) -> list:
    """The events, each held collective's index counted from `first` (the step's own)."""
    return [
        [e[0], e[1] - first, *e[2:]] if e[0] in probe.NUMBERED else e for e in events
    ]


def step_report(flight, traffic, start, arrivals, optimizer, me) -> dict:
    """The step's backward and finish(): its events (held collectives numbered from 0),
    what each reduce-scatter's input held, the bytes held at each hook, the pieces'
    gradients, the traffic so far; `stepped` False until step() has run (`stepped`)."""
    optimizer, names = optimizer
    first = min((e[1] for e in flight.events[start:] if len(e) == 3), default=0)
    events = numbered(flight.events[start:], first)
    order = [e[1] for e in events if e[0] == "grad"]
    inputs = [flight.inputs[e[1] + first] for e in events if e[0] == probe.RS]
    per_rank = probe.rank_gradients(arrivals.params, arrivals.grads, me)
    return {
        "events": events,
        "reduce_scatters": [
            probe.held(t, arrivals.grads, order, me.world_size) for t in inputs
        ],
        "held": [
            [at - start, held, kept, [i - first for i in rs]]
            for at, held, kept, rs in arrivals.held
        ],
        "pieces": probe.piece_verdicts(optimizer, names, per_rank, me),
        "traffic": traffic,
        "stepped": False,
        "first": first,
    }


def stepped(report: dict, flight, traffic, start, optimizer) -> None:
    """The step's report once step() has run: its events and traffic whole, the
    optimizer's bytes."""
    report["events"] = numbered(flight.events[start:], report.pop("first"))
    report |= {"traffic": traffic, "stepped": True}
    report["optimizer_bytes"] = probe.state_bytes(optimizer[0])


def train(student, name: str, me: zb.Rank, flight, meter, steps: Steps) -> dict:
    """The student's Zero2 with optimizer `name` for STEPS steps, until one fails
    (`steps.failed`; every rank agrees before the harness's own collectives): each
    finished step's report."""
    model = model_from(SEED, me)
    arrivals = Arrivals(model, flight)
    run = {"masters": [], "steps": [], "model": model}
    where = f"the {name} run's Zero2(model, ...)"
    with steps.at(where):
        zero, optimizer, run["masters"] = build(student, model, name, arrivals, me)
    for index in range(STEPS):
        if not steps.agree(where):
            return run
        start, arrivals.held = (len(flight.events), len(meter.events)), []
        where = f"the {name} run's step {index}"
        with steps.at(where):
            next_token_loss(model, rank_batch(CONFIG, BATCH, index, me)).backward()
            arrivals.measure()
            flight.note("finish")
            call_student(zero, "finish")
            flight.note("finished")
            arrivals.measure()
        if not steps.agree(where):
            return run
        sent = meter.events[start[1] :]
        report = step_report(
            flight, probe.traffic(sent), start[0], arrivals, optimizer, me
        )
        run["steps"].append(report)  # what backward showed counts if step() fails
        mark = len(
            meter.events
        )  # the harness's own gather is not the student's traffic
        where = f"the {name} run's step {index}, in step()"
        with steps.at(where):
            call_student(zero, "step")
            flight.note("stepped")
        if not steps.agree(where):
            return run
        traffic = probe.traffic(sent + meter.events[mark:])
        stepped(report, flight, traffic, start[0], optimizer)
        where = f"the {name} run's step {index}, in zero_grad()"
        with steps.at(where):
            call_student(zero, "zero_grad")
    steps.agree(where)
    return run


def reference(name: str, me: zb.Rank, mean: str, decay_1d: bool) -> torch.nn.Module:
    """One process from the same weights: each step, the N slices' gradients computed
    apart, averaged as the student's were (`mean`), one optimizer in two groups (no
    weight decay on 1-D tensors, unless `decay_1d`)."""
    model = model_from(SEED, me)
    optimizer_class, options = OPTIMIZERS[name]
    params = list(model.parameters())
    groups = [[p for p in params if p.dim() > 1], [p for p in params if p.dim() <= 1]]
    optimizer = optimizer_class(
        [{"params": groups[0]}, {"params": groups[1]}]
        if decay_1d
        else [{"params": groups[0]}, {"params": groups[1], "weight_decay": 0.0}],
        **options,
    )
    for index in range(STEPS):
        tokens = random_batch(CONFIG, BATCH * me.world_size, seed=index).to(me.device)
        slices = tokens.split(BATCH)  # rank r's slice is the r-th
        per_rank = [grad(next_token_loss(model, part), params) for part in slices]
        for param, grads in zip(params, zip(*per_rank)):
            param.grad = probe.MEANS[mean](list(grads), me.world_size)
        optimizer.step()
    return model


def parity(run: dict, name: str, me: zb.Rank) -> dict:
    """The weights against the reference that averages as the student did; if they
    differ, against one that decays 1-D tensors too (the usual mistake)."""
    means = run["steps"][0]["pieces"]["means"]
    mean = means[0] if means else "sum / N"
    out = probe.difference(run["model"], reference(name, me, mean, False))
    if out["diff"]:
        out["decay_1d"] = probe.difference(
            run["model"], reference(name, me, mean, True)
        )
    return out | {"mean": mean}


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    runs, steps = {}, Steps(me.rank, cli.student, hints.zero(me.world_size))
    with ordered_sums(), InFlight() as flight, CommMeter() as meter:
        student = load_student(cli.student)
        for name in OPTIMIZERS:
            if steps.going:  # a failure ends the launch: the next run is not started
                runs[name] = train(student, name, me, flight, meter, steps)
    refuse("your ZeRO-2", flight)
    for name, run in runs.items():
        run["parity"] = parity(run, name, me) if steps.going else None
        model = run.pop("model")
        run["weight_scale"] = max(
            p.detach().abs().max().item() for p in model.parameters()
        )
    model = model_from(SEED, me)
    zb.report(
        record=flight.record(),  # checked against its witness (zerobook.trust.witness)
        runs=runs,
        failed=steps.failed,  # zerobook.labs.crash
        params={name: p.numel() for name, p in model.named_parameters()},
        dims={name: p.dim() for name, p in model.named_parameters()},
        options={name: dict(options) for name, (_, options) in OPTIMIZERS.items()},
        world_size=me.world_size,
        element_size=4,
        bucket_cap_bytes=BUCKET_CAP_BYTES,
        max_in_flight=MAX_IN_FLIGHT,
    )


if __name__ == "__main__":
    main()
