"""Lab 5 harness: the student's ZeRO-3 in FSDP2's per-parameter layout, graded from one run.

    python -m torch.distributed.run --standalone --nproc-per-node 3 \
        -m zerobook.labs.zero3 --student zero3_student.py --part train

The student's file defines a class
    Zero3(model, units, optimizer_class, **options)   piece r of every parameter, hooks
    .step(), .zero_grad()                              AdamW on the pieces; their grads
The one part, `train`, builds the course's GPT (tied embedding) from one seed on every rank,
hands `units = list(model.blocks)` to the student's Zero3 with an AdamW (weight decay on)
and trains STEPS steps on the rank's slice of each batch, every sum in rank order
(zerobook.train.parity), every all-gather and reduce-scatter in flight until waited on
(zerobook.data_parallel.inflight). The harness's own hooks, registered before the student's hooks
run, note when each unit has computed (a copy of its full weights) and when its backward
is done (a copy of each gradient), and the bytes of full parameters allocated at each.
Each all-gather and reduce-scatter is told apart by its input: the unit whose pieces (or
gradients) it holds. Reported per step: the events, the peak, what the student's object
keeps after step(); and the weights each forward used against one process that sums the
same per-rank gradients in rank order. Every graded test reads this one run
(zerobook.labs.zero3_events), launched on 3 ranks: a sum has an order, pieces need padding.
"""

import functools
import types

import torch

import zerobook as zb
from zerobook.labs.freed import FreedGuard, rebound, storage_key
from zerobook.data_parallel.inflight import InFlight
from zerobook.labs import hints
from zerobook.labs.crash import Steps
from zerobook.labs.harness import call_student, frozen, lab_params, load_student
from zerobook.labs.harness import parse_args, refuse
from zerobook.train.models import GPT, GPTConfig, next_token_loss, random_batch
from zerobook.train import measure
from zerobook.train.parity import ordered_sums, rank_order_sum
from zerobook.train.training import rank_batch
from zerobook.labs.zero3_record import (
    RecordedAdamW,
    kept,
    layout,
    step_events,
    torch_fsdp_used,
)

PARTS = ("train",)
# 3 blocks of 12,704 parameters; root: the tied embedding (3,200) and the final norm (64)
CONFIG = GPTConfig(vocab=100, hidden=32, layers=3, heads=4, seq_len=16)
STEPS, BATCH = 4, 2
SEED = lab_params(seed=1234)["seed"]  # an instructor may grade with another
OPTIONS = frozen({"lr": 1e-3, "weight_decay": 0.1})


class Watch:
    """The harness's hooks: each unit computed (its full weights copied, before a
    post-hook of the student's frees them); each gradient's arrival (copied) and each
    unit's backward done; at each, the bytes of full parameters allocated per unit."""

    def __init__(self, model, flight: InFlight):
        blocks = {
            f"blocks.{k}": list(b.parameters()) for k, b in enumerate(model.blocks)
        }
        owned = {id(p) for params in blocks.values() for p in params}
        self.units = {"root": [p for p in model.parameters() if id(p) not in owned]}
        self.units |= blocks
        self.names = {id(p): name for name, p in model.named_parameters()}
        self.unit_of = {id(p): u for u, params in self.units.items() for p in params}
        self.flight, self.model = flight, model
        self.own_buffers = {measure.storage_key(b) for b in model.buffers()}
        self.grads, self.weights, self.peak = {}, {}, {"bytes": -1}
        for param in model.parameters():
            param.register_post_accumulate_grad_hook(self.arrived)

    def hook_forward(self) -> None:
        """Forward post-hooks run before every other (prepend): the unit just computed."""
        for k, block in enumerate(self.model.blocks):
            block.register_forward_hook(self.computed(f"blocks.{k}"), prepend=True)
        self.model.register_forward_hook(self.computed("root"), prepend=True)

    def computed(self, unit: str):
        def hook(module, args, output):
            self.note("computed", unit)
            for p in self.units[unit]:
                self.weights[self.names[id(p)]] = p.detach().clone()

        return hook

    def arrived(self, param) -> None:
        name, unit = self.names[id(param)], self.unit_of[id(param)]
        self.grads[name] = param.grad.detach().clone()
        if all(self.names[id(p)] in self.grads for p in self.units[unit]):
            self.note("backward done", unit)

    def allocated(self) -> dict:
        """Unit -> bytes of its full parameters' storages now."""
        return {
            u: sum(p.untyped_storage().nbytes() for p in params)
            for u, params in self.units.items()
        }

    def note(self, *event) -> None:
        self.flight.note(*event)
        now = self.allocated()
        if sum(now.values()) > self.peak["bytes"]:
            units = [u for u, b in now.items() if b]
            self.peak = {"bytes": sum(now.values()), "at": list(event), "units": units}


def model_from(me: zb.Rank) -> torch.nn.Module:
    """The GPT from SEED; LayerNorms' ones and zeros nudged, so that every parameter's
    pieces differ from every other's (the harness tells them apart by value)."""
    torch.manual_seed(SEED)
    model = GPT(CONFIG)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 1:
                param.add_(0.02 * torch.randn_like(param))
    return model.to(me.device)


def train(student, me: zb.Rank, flight: InFlight, steps: Steps, guard) -> dict:
    """The student's Zero3 for STEPS steps, until a step fails (`steps.failed`): each
    finished step's report, the weights each forward used."""
    model = model_from(me)
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    watch = Watch(model, flight)
    guard.name({p: name for name, p in model.named_parameters()})
    run = {"steps": [], "layout": None, "groups": [], "seen": [], "model": model,
           "initial": list(initial.items())}  # fmt: skip
    run["units"] = {
        u: [watch.names[id(p)] for p in ps] for u, ps in watch.units.items()
    }
    storages = {name: storage_key(p) for name, p in model.named_parameters()}
    with steps.at("Zero3(model, units, optimizer_class)"):
        if not hasattr(student, "Zero3"):
            raise AttributeError("your file defines no class 'Zero3'")
        make = types.SimpleNamespace(Zero3=functools.partial(student.Zero3, **OPTIONS))
        zero = call_student(make, "Zero3", model, list(model.blocks), RecordedAdamW)
        plan = layout(initial, me, watch.names)  # its optimizer's tensors (freed?)
        rebound(model, storages)
    if not steps.agree("Zero3(model, units, optimizer_class)"):
        return run
    watch.hook_forward()
    masters = plan.pop("masters")
    for index in range(STEPS):
        start, first = len(flight.events), len(flight.inputs)
        watch.grads, watch.weights, watch.peak = {}, {}, {"bytes": -1}
        with steps.at(index):
            guard.at = f"step {index}, forward"
            loss = next_token_loss(model, rank_batch(CONFIG, BATCH, index, me))
            watch.note("backward")
            guard.at = f"step {index}, backward"
            loss.backward()
            watch.note("step")
            guard.at = f"step {index}, step()"
            events = step_events(
                flight, start, first, watch, plan["found"], masters, me
            )
            call_student(zero, "step")
            kept_now = kept(zero, student, watch, masters)
            guard.at = f"step {index}, zero_grad()"
            call_student(zero, "zero_grad")
            rebound(model, storages)
        if not steps.agree(index):
            break
        run["steps"].append({"events": events, "peak": watch.peak, "kept": kept_now})
        run["seen"].append(dict(watch.weights))
    run["groups"] = [
        {"weight_decay": g["weight_decay"], "lr": g["lr"],
         "params": [n for n, i in plan["found"].items() if any(masters[i] is m for m in g["params"])]}
        for opt in RecordedAdamW.made for g in opt.param_groups
    ]  # fmt: skip
    run["layout"] = {**plan, "found": sorted(plan["found"])}
    return run


MEANS = frozen(
    {"sum / N": lambda total, n: total / n, "sum * (1/N)": lambda t, n: t * (1 / n)}
)
SUMMED = lambda total, n: total  # noqa: E731 - no mean: named if the weights are its


def reference(me: zb.Rank, mean, first: bool = False) -> list[dict]:
    """One process: the weights before each step, each step's gradient the N slices'
    gradients summed in rank order and averaged; AdamW, no weight decay on 1-D tensors."""
    model = model_from(me)
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.dim() >= 2]},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, **OPTIONS)
    before = []
    for index in range(STEPS):
        before.append({n: p.detach().clone() for n, p in model.named_parameters()})
        tokens = random_batch(CONFIG, BATCH * me.world_size, seed=index).to(me.device)
        per_rank = []
        for r in range(me.world_size):
            optimizer.zero_grad(set_to_none=True)
            next_token_loss(model, tokens[r * BATCH : (r + 1) * BATCH]).backward()
            per_rank.append(torch.cat([p.grad.reshape(-1) for p in params]))
        stacked, n = torch.stack(per_rank), me.world_size
        average = (
            rank_order_sum(mean(stacked, n))
            if first
            else mean(rank_order_sum(stacked), n)
        )
        for param, grad in zip(params, average.split([p.numel() for p in params])):
            param.grad = grad.view_as(param)
        optimizer.step()
    return before


def parity(seen: list[dict], me: zb.Rank) -> dict:
    """The first step whose forward used weights other than one process's (either mean),
    the parameter off most there and by how much; `missing`: never seen computing;
    `summed`: the weights are those of the gradients' sum, never divided by N;
    `divided_first`: of each rank's gradients divided by N before the sum."""
    best = None
    for way, mean in MEANS.items():
        found = first_off(seen, reference(me, mean), way)
        if found["step"] is None:
            return found
        best = best if best and best["step"] >= found["step"] else found
    best["summed"] = first_off(seen, reference(me, SUMMED), "sum")["step"] is None
    best["divided_first"] = any(
        first_off(seen, reference(me, mean, first=True), way)["step"] is None
        for way, mean in MEANS.items()
    )
    return best


def first_off(seen: list[dict], right: list[dict], way: str) -> dict:
    """The first step whose forward used weights other than `right`'s."""
    for step, (used, want) in enumerate(zip(seen, right)):
        missing = sorted(set(want) - set(used))
        diffs = {n: (used[n] - want[n]).abs().max().item() for n in used}
        worst = max(diffs, key=diffs.get)
        if diffs[worst] or missing:
            return {"step": step, "diff": diffs[worst], "worst": worst,
                    "missing": missing, "mean": way}  # fmt: skip
    return {"step": None, "diff": 0.0, "worst": None, "missing": [], "mean": way}


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    steps = Steps(me.rank, cli.student, hints.zero3(me.world_size))
    # entered before the file's import (the modes the grader measures with), left after
    with FreedGuard(at="the constructor") as guard:
        with ordered_sums(), InFlight() as flight:
            student = load_student(cli.student)
            run = train(student, me, flight, steps, guard)
        more = [f"your model uses {n}" for n in torch_fsdp_used(run["model"])]
        refuse("your ZeRO-3", flight, more)
        model, seen = run.pop("model"), run.pop("seen")
        params = {
            n: {"numel": p.numel(), "dim": p.dim()} for n, p in model.named_parameters()
        }
        zb.report(
            record=flight.record(),  # checked against its witness (zerobook.trust.witness)
            **run,
            failed=steps.failed,  # zerobook.labs.crash
            parity=parity(seen, me) if steps.going else None,
            params=params,
            world_size=me.world_size,
            element_size=4,
            options=OPTIONS,
            seed=SEED,
        )


if __name__ == "__main__":
    main()
