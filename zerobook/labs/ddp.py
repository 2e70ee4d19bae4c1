"""Lab 2 harness: the student's bucketed, overlapped DDP, graded from the run's events.

    python -m torch.distributed.run --standalone --nproc-per-node 3 \
        -m zerobook.labs.ddp --student ddp_student.py --part train

The student's file defines a class
    BucketedDDP(model, bucket_cap_bytes)  rank 0's weights everywhere, gradient hooks
    .finish()                             after backward: wait for each bucket, the mean
The one part, `train`, gives each rank a GPT from a seed of its own, wraps it and trains
STEPS AdamW steps (until one fails: what the steps before showed is still reported, with
the failure, zerobook.labs.crash) on the rank's slice of each batch, every sum in rank order
(zerobook.train.parity), every all-reduce in flight until waited on (zerobook.data_parallel.inflight). It
reports per step the events in order (each gradient's arrival, each all-reduce and wait,
finish()), the gradients each all-reduce held (matched against copies made as they
arrived) and what each param.grad held after finish(); and the weights after the
broadcast and after the last step, against one process that sums the same per-rank
gradients in rank order. Every graded test reads this one run (zerobook.labs.bucket_events),
launched on 3 ranks: with 2, a sum has one order only, and equality would prove little.
"""

import torch

import zerobook as zb
from zerobook.data_parallel.inflight import InFlight
from zerobook.labs import hints
from zerobook.labs.crash import Steps
from zerobook.labs.harness import call_student, lab_params, load_student
from zerobook.labs.harness import parse_args, refuse
from zerobook.labs.means import MEANS, verdicts
from zerobook.train.models import GPT, GPTConfig, next_token_loss, random_batch
from zerobook.train.parity import ordered_sums
from zerobook.train.training import rank_batch

PARTS = ("train",)
# 3 blocks: 39 gradients, 41,376 elements, which backward does not produce in the
# reverse of model.parameters()'s order; 32 KiB buckets: 5, the last under the cap
# (finish() must send it)
CONFIG = GPTConfig(vocab=100, hidden=32, layers=3, heads=4, seq_len=16)
# an instructor's own
HIDDEN = lab_params(bucket_cap_bytes=32 * 1024, steps=3, seed=1234)
BUCKET_CAP_BYTES, STEPS, SEED = (
    HIDDEN["bucket_cap_bytes"],
    HIDDEN["steps"],
    HIDDEN["seed"],
)
BATCH, LR = 2, 1e-3


class Arrivals:
    """The harness's post-accumulate-grad hooks, registered before the student's (so
    they run first): each arrival noted in the events, and a copy of the gradient."""

    def __init__(self, model: torch.nn.Module, flight: InFlight):
        self.names = {id(p): name for name, p in model.named_parameters()}
        self.flight, self.grads = flight, {}
        for param in model.parameters():
            param.register_post_accumulate_grad_hook(self.arrived)

    def arrived(self, param) -> None:
        name = self.names[id(param)]
        self.flight.note("grad", name)
        self.grads[name] = param.grad.detach().clone()


def held(tensor: torch.Tensor, grads: dict, order: list[str], world_size: int) -> dict:
    """The gradients an all-reduce's 1-D view held, in its order, matched bit for bit
    against copies made as they arrived (or against those copies divided by the world
    size, as PyTorch's DDP divides before it sums: `divided`); `unmatched`: where
    nothing matched."""
    found = held_as(tensor, grads, order)
    if found["unmatched"] is None:
        return found
    for divide in MEANS.values():
        divided = {name: divide(grad, world_size) for name, grad in grads.items()}
        first = held_as(tensor, divided, order)
        if first["unmatched"] is None:
            return {**first, "divided": True}
    return found


def held_as(tensor: torch.Tensor, grads: dict, order: list[str]) -> dict:
    """held(), against `grads` as given."""
    flat, names, offset = tensor.reshape(-1), [], 0
    while offset < flat.numel():
        start = order.index(names[-1]) + 1 if names else 0
        candidates = order[start:] + order[:start]  # the next to arrive first
        fits = [n for n in candidates if n not in names]
        match = next((n for n in fits if matches(flat, offset, grads[n])), None)
        if match is None:
            return {"params": names, "numel": flat.numel(), "unmatched": offset}
        names.append(match)
        offset += grads[match].numel()
    return {"params": names, "numel": flat.numel(), "unmatched": None}


def matches(flat: torch.Tensor, offset: int, grad: torch.Tensor) -> bool:
    piece = flat[offset : offset + grad.numel()]
    same_size = piece.numel() == grad.numel()
    return same_size and torch.equal(piece, grad.reshape(-1).to(piece.dtype))


def step_report(flight, start: int, first: int, arrivals: Arrivals, model, me) -> dict:
    """The step's events (all-reduces numbered from 0), what each all-reduce held, what
    each gradient held after finish()."""
    renumber = ("all_reduce", "wait")
    events = [
        [e[0], e[1] - first, *e[2:]] if e[0] in renumber else e
        for e in flight.events[start:]
    ]
    order = [e[1] for e in events if e[0] == "grad"]
    inputs = [flight.inputs[e[1] + first] for e in events if e[0] == "all_reduce"]
    reduces = [held(t, arrivals.grads, order, me.world_size) for t in inputs]
    grads, average = verdicts(model, arrivals.grads, me)
    return {
        "events": events,
        "all_reduces": reduces,
        "grads": grads,
        "average": average,
    }


def model_from(seed: int, me: zb.Rank) -> torch.nn.Module:
    torch.manual_seed(seed)
    return GPT(CONFIG).to(me.device)


def difference(model, reference) -> dict:
    """Largest difference of the weights, and the parameter where it is."""
    pairs = zip(model.named_parameters(), reference.parameters())
    diffs = {
        name: (p.detach() - q.detach()).abs().max().item() for (name, p), q in pairs
    }
    worst = max(diffs, key=diffs.get)
    return {"diff": diffs[worst], "worst": worst if diffs[worst] else None}


def train(student, me: zb.Rank, flight: InFlight, steps: Steps) -> dict:
    """The student's DDP for STEPS steps, until a step fails (`steps.failed`): the
    broadcast's result (None if the constructor failed), each finished step's report."""
    model = model_from(SEED + me.rank, me)  # a rank's own weights, until the broadcast
    arrivals = Arrivals(model, flight)
    run = {"broadcast": None, "steps": [], "model": model}
    steps.hint = lambda exc, index, where: hints.ddp(exc, index, where, run["steps"])
    with steps.at("BucketedDDP(model, bucket_cap_bytes)"):
        ddp = call_student(student, "BucketedDDP", model, BUCKET_CAP_BYTES)
    if not steps.agree("BucketedDDP(model, bucket_cap_bytes)"):
        return run
    run["broadcast"] = difference(model, model_from(SEED, me))
    run["broadcast"]["calls"] = sum(e[0] == "broadcast" for e in flight.events)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    for index in range(STEPS):
        start, first = len(flight.events), len(flight.inputs)
        with steps.at(index):
            next_token_loss(model, rank_batch(CONFIG, BATCH, index, me)).backward()
            flight.note("finish")
            call_student(ddp, "finish")
        if not steps.agree(index):
            break
        flight.note("finished")
        run["steps"].append(step_report(flight, start, first, arrivals, model, me))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return run


def reference(me: zb.Rank, average: str) -> torch.nn.Module:
    """One process from rank 0's weights: each step, the N slices' gradients computed
    apart, summed in rank order and averaged as the student's were (divided by N after
    the sum if the student divided first: the lab's contract)."""
    model = model_from(SEED, me)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    params = list(model.parameters())
    for index in range(STEPS):
        tokens = random_batch(CONFIG, BATCH * me.world_size, seed=index).to(me.device)
        per_rank = []
        for r in range(me.world_size):
            optimizer.zero_grad(set_to_none=True)
            next_token_loss(model, tokens[r * BATCH : (r + 1) * BATCH]).backward()
            per_rank.append([p.grad.clone() for p in params])
        for param, grads in zip(params, zip(*per_rank)):
            total = grads[0].clone()
            for grad in grads[1:]:
                total += grad
            param.grad = MEANS.get(average, MEANS["sum / N"])(total, me.world_size)
        optimizer.step()
    return model


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    steps = Steps(me.rank, cli.student)
    with ordered_sums(), InFlight() as flight:
        student = load_student(cli.student)
        run = train(student, me, flight, steps)
    refuse("your DDP", flight)
    model = run.pop("model")
    scale = max(p.detach().abs().max().item() for p in model.parameters())
    parity = None  # a run that failed is not compared (its tests say "not checked")
    if steps.going:
        parity = difference(model, reference(me, run["steps"][0]["average"]))
    params = {name: p.numel() for name, p in model.named_parameters()}
    zb.report(
        record=flight.record(),  # checked against its witness (zerobook.trust.witness)
        **run,
        failed=steps.failed,  # zerobook.labs.crash
        params=params,
        element_size=4,
        world_size=me.world_size,
        bucket_cap_bytes=BUCKET_CAP_BYTES,
        parity=parity,
        weight_scale=scale,
    )


if __name__ == "__main__":
    main()
