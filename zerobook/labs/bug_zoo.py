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
`verdict` ("" when its weights equal the course's loop, bit for bit; else what differs and
where, and the steps it took where a correct loop takes another number: backward passes through
its model, counted by a hook on the last parameter), `fingerprint` (the sum of its weights) and `skipped` (the steps the course's loop left
out). After the student's loop the ranks gather their step counts (an all-gather): a rank still
in a step of its own is named by the mismatch.
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
from zerobook.trust import plain_objects

PARTS = ("skip", "uneven", "replicas")
WIDTH = 16
# extras: samples left over after `steps` full batches on every rank, one case each (1 on 3
# ranks: a seventh step for rank 0 alone; 7: 21, 20, 20 samples, a seventh full batch for rank 0,
# which a loop that only drops the last, partial batch still takes)
PARAMS = lab_params(
    seed=0, steps=6, per_rank=4, lr=0.05, inf_steps=[1, 4], extras=[1, 7], batch=3
)


def make_model() -> torch.nn.Module:
    """The MLP every part trains, built from the current random state."""
    return torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, 1)
    )


def course_step(model, loss, lr: float) -> None:
    """DDP's step as the lab's file writes it: backward, each gradient summed and divided by N,
    then SGD."""
    model.zero_grad()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad


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


def course_loop(part: str, model, me: zb.Rank, data) -> tuple[int, int]:
    """What the part asks for, as the course writes it; returns (steps taken, steps left out)."""
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
        course_step(model, loss, lr)
    return len(data) - skipped, skipped


def counted(model, count: list):
    """`model`, each backward pass through it counted in count[0] (a hook on its last
    parameter, after its gradient is accumulated): the steps a loop of ddp_step takes."""
    last = list(model.parameters())[-1]
    last.register_post_accumulate_grad_hook(
        lambda _: count.__setitem__(0, count[0] + 1)
    )
    return model


def compare(theirs, ours, took: int, takes: int) -> str:
    """ "" if the two models' weights are equal bit for bit; else the first parameter that is
    not, and by how much (led by the steps, where the student's loop took another number)."""
    steps = f"took {took} steps where a correct loop takes {takes}: " * (took != takes)
    for (name, a), b in zip(theirs.named_parameters(), ours.parameters()):
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


def run_student(student, part: str, me: zb.Rank, start, build, data):
    """The part's function of the student's file on this rank's data; returns its model and
    the steps it took."""
    lr, count = PARAMS["lr"], [0]
    if part == "replicas":
        make = lambda: counted(build(), count)  # noqa: E731
        model = call_student(student, "train_replicas", make, PARAMS["seed"], data, lr)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"train_replicas returned {type(model).__name__}: return the model"
            )
        return model, count[0]
    model = counted(copy.deepcopy(start), count)
    if part == "uneven":
        call_student(student, "train_uneven", model, data, lr, PARAMS["batch"])
    else:
        call_student(student, "train_skipping", model, data, lr)
    return model, count[0]


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
        theirs, took = run_student(student, part, me, start, build, data)
        # a rank still in a step of its own: a mismatch (JSON: a peer's pickle could run code)
        plain_objects.all_gather("done")
        ours = copy.deepcopy(start)
        takes, left_out = course_loop(part, ours, me, data)
        skipped += left_out
        verdicts.append(compare(theirs, ours, took, takes))
    refuse("your repaired loop")
    fingerprint = float(sum(p.detach().double().sum() for p in theirs.parameters()))
    said = [f"with {len(d[0])} samples: {v}" if part == "uneven" else v
            for d, v in zip(cases, verdicts) if v]  # fmt: skip
    zb.report(verdict="; ".join(said), fingerprint=fingerprint, skipped=skipped)


if __name__ == "__main__":
    main()
