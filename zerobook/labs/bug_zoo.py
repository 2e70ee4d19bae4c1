"""Lab 8 harness, the bug zoo: one of the student's repaired training loops on every rank, beside
the course's correct loop on the same data, compared bit for bit.

    python -m torch.distributed.run --standalone --nproc-per-node 3 -m zerobook.labs.bug_zoo --student bug_zoo_student.py --part skip

Each part calls one function of the student's file on every rank with a small MLP and this
rank's data; every step is the file's `ddp_step(model, loss, lr)` (each gradient summed by
all_reduce, divided by N, then p -= lr * grad), which the course's loop repeats:

    skip      train_skipping(model, batches, lr): a step per batch, except where any rank's
              loss is not finite: there every rank skips it (one rank's batch holds an inf)
    uneven    train_uneven(model, samples, lr, batch): the samples (x, y), the same on every
              rank, dealt out (rank r takes rows r, r + N, ...), a step per `batch` of them;
              every rank takes len(x) // (N * batch) steps, the rest left out (called once for
              each count of samples in PARAMS' extras, a fresh model each time)
    replicas  train_replicas(make_model, seed, batches, lr): the model built by make_model()
              after torch.manual_seed, then a step per batch; every rank starts from the weights
              `seed` gives

The lab's broken versions (bugs_student.py) hang or train the replicas apart. Each rank reports
`verdict` ("" when its weights equal the course's loop's bit for bit, ddp_step taken any way
it may rightly be written: zerobook.labs.bug_zoo_story; else what differs and where, and the steps it took
where a correct loop takes another number: backward passes through its model, counted by a
hook on the last parameter; led by the overflows a rank stepped over, or by the replicas
built apart), `fingerprint` (the sum of its weights) and `skipped` (the steps the course's
loop left out). After the student's loop the ranks gather how their replicas started (an
all-gather): a rank still in a step of its own is named by the mismatch.
"""

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F

import zerobook as zb
from zerobook.labs.harness import (
    call_student,
    lab_params,
    load_student,
    parse_args,
    refuse,
)
from zerobook.labs.bug_zoo_story import ACCEPTED, NAMED, WAYS, Watch, mean_of, sgd
from zerobook.labs.bug_zoo_story import skip_story, start_story
from zerobook.trust import plain_objects

PARTS = ("skip", "uneven", "replicas")
WIDTH = 16
# extras: samples left over after `steps` full batches on every rank, one case each (1 on 3
# ranks: a seventh step for rank 0 alone; 7: 21, 20, 20 samples, a seventh full batch for rank 0,
# which a loop that only drops the last, partial batch still takes); inf_steps: on 3 ranks rank
# 0's overflow (step 3) before rank 1's (step 4), so a flag heard from rank 0 alone is told
# from one that no rank hears (an overflow spoils every later step)
PARAMS = lab_params(
    seed=0, steps=6, per_rank=4, lr=0.05, inf_steps=[3, 4], extras=[1, 7], batch=3
)


def make_model() -> torch.nn.Module:
    """The MLP every part trains, built from the current random state."""
    return torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, 1)
    )


def course_step(model, loss, lr: float, way=WAYS[0]) -> None:
    """DDP's step as the lab's file writes it: backward, each gradient summed and divided by N,
    then SGD (or another `way`, a (mean, update) pair: zerobook.labs.bug_zoo_story)."""
    mean, update = way
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        mean_of(p.grad, mean)
    with torch.no_grad():
        for p in model.parameters():
            sgd(p, lr, update)


def rows(count: int, seed: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` samples (x, its target), the same on every rank for the same seed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(count, WIDTH, generator=g)
    return x.to(device), x.sum(dim=1, keepdim=True).sin().to(device)


def batches(me: zb.Rank, with_inf: bool) -> list:
    """This rank's batch of each step; with `with_inf`, at each of PARAMS' inf_steps one rank's
    (step s: rank s mod N) holds an inf."""
    out = []
    for s in range(PARAMS["steps"]):
        seed = PARAMS["seed"] * 1000 + s
        x, y = rows(PARAMS["per_rank"] * me.world_size, seed, me.device)
        x, y = x.chunk(me.world_size)[me.rank].clone(), y.chunk(me.world_size)[me.rank]
        if with_inf and s in PARAMS["inf_steps"] and s % me.world_size == me.rank:
            x[0, 0] = float("inf")
        out.append((x, y))
    return out


def course_loop(part: str, model, me: zb.Rank, data, way) -> tuple[int, int]:
    """What the part asks for, as the course writes it, ddp_step's mean taken `way`; returns
    (steps taken, steps left out)."""
    lr, skipped = PARAMS["lr"], 0
    if part == "uneven":
        x, y = data
        steps, b = len(x) // (me.world_size * PARAMS["batch"]), PARAMS["batch"]
        x, y = x[me.rank :: me.world_size], y[me.rank :: me.world_size]
        data = [(x[i * b : (i + 1) * b], y[i * b : (i + 1) * b]) for i in range(steps)]
    for x, y in data:
        loss = F.mse_loss(model(x), y)
        if part == "skip":  # any rank's loss not finite: every rank skips the step
            bad = torch.tensor([float(not torch.isfinite(loss))], device=me.device)
            dist.all_reduce(bad)
            if bad.item():
                skipped += 1
                continue
        course_step(model, loss, lr, way)
    return len(data) - skipped, skipped


def compare(theirs, ours: dict, took: int, takes: int, story: str = "") -> str:
    """ "" if the student's weights equal the course's loop's, taking the mean one of the
    ACCEPTED ways, bit for bit; else what they equal (a NAMED way) or the first parameter
    that differs, and by how much (led by the steps, where the student's loop took another
    number, and by `story`: what the part saw go wrong before the weights)."""
    if any(same(theirs, ours[way]) for way in WAYS if way[0] in ACCEPTED):
        return ""
    steps = f"took {took} steps where a correct loop takes {takes}: " * (took != takes)
    steps = f"{story}; so: {steps}" if story else steps
    named = [mean for mean, u in WAYS if mean in NAMED and same(theirs, ours[mean, u])]
    if named:
        return f"{steps}your ddp_step steps with {NAMED[named[0]]}"
    for (name, a), b in zip(theirs.named_parameters(), ours[WAYS[0]].parameters()):
        if not torch.equal(a, b):
            if not torch.isfinite(a).all():
                nan = "holds NaN or inf: a step ran on a loss that was not finite"
                return f"{steps}{name} {nan}"
            gap = (a - b).abs().max().item()
            rounding = gap < 1e-6 * max(1.0, b.abs().max().item())
            why = (
                ": rounding, not the bug: keep ddp_step's arithmetic as given (all_reduce "
                "SUM, then divide by N, then p -= lr * grad)"
                if rounding
                else ""
            )
            return (
                f"{steps}{name} differs from the course's loop by up to {gap:.3g}{why}"
            )
    return ""


def same(a, b) -> bool:
    """The two models' weights equal, bit for bit."""
    return all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def run_student(student, part: str, me: zb.Rank, start, build, data, watch: Watch):
    """The part's function of the student's file on this rank's data, its model watched
    (the steps it takes; a replica's start); returns its model."""
    lr = PARAMS["lr"]
    if part == "replicas":
        make = lambda: watch.on(build(), built=True)  # noqa: E731
        model = call_student(student, "train_replicas", make, PARAMS["seed"], data, lr)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"train_replicas returned {type(model).__name__}: return the model"
            )
        return model
    model = watch.on(copy.deepcopy(start))
    if part == "uneven":
        call_student(student, "train_uneven", model, data, lr, PARAMS["batch"])
    else:
        call_student(student, "train_skipping", model, data, lr)
    return model


def story(part: str, watch: Watch, starts: list, me: zb.Rank) -> str:
    """What the part saw go wrong before the weights: the overflows a rank stepped over,
    the replicas' start (zerobook.labs.bug_zoo_story)."""
    if part == "skip":
        return skip_story(watch.stepped, me.rank, me.world_size, PARAMS["inf_steps"],
                          PARAMS["steps"])  # fmt: skip
    return start_story(starts) if part == "replicas" else ""


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    student = load_student(cli.student)
    part, seed = cli.part, PARAMS["seed"]
    build = lambda: make_model().to(me.device)  # noqa: E731
    torch.manual_seed(seed)
    start = build()
    if (
        part == "uneven"
    ):  # each count of samples left over: a hang, and a count a fix forgets
        full = me.world_size * PARAMS["batch"] * PARAMS["steps"]
        cases = [rows(full + extra, seed, me.device) for extra in PARAMS["extras"]]
    else:
        cases = [batches(me, with_inf=part == "skip")]
    verdicts, skipped = [], 0
    for data in cases:
        watch = Watch(data if part != "uneven" else [])
        theirs = run_student(student, part, me, start, build, data, watch)
        # a rank still in a step of its own: a mismatch (JSON: a peer's pickle could run code)
        starts = plain_objects.all_gather(watch.start(theirs, start))
        ours = {way: copy.deepcopy(start) for way in WAYS}
        for way, model in ours.items():
            takes, left_out = course_loop(part, model, me, data, way)
        skipped += left_out
        verdicts.append(compare(theirs, ours, len(watch.stepped), takes,
                                story(part, watch, starts, me)))  # fmt: skip
    refuse("your repaired loop")
    fingerprint = float(sum(p.detach().double().sum() for p in theirs.parameters()))
    said = [f"with {len(d[0])} samples: {v}" if part == "uneven" else v
            for d, v in zip(cases, verdicts) if v]  # fmt: skip
    zb.report(verdict="; ".join(said), fingerprint=fingerprint, skipped=skipped)


if __name__ == "__main__":
    main()
