"""What the bug zoo (zerobook.labs.bug_zoo) says about a loop that is not a correct one: the
ways ddp_step may take the mean, which steps a rank took against the overflows, and whether
the replicas started equal (rank side).

Two orders of one mean are both correct, and round differently: the sum of the ranks'
gradients divided by N (as the lab's ddp_step is given) and each rank's gradient divided by
N before the all_reduce sums them (PyTorch DDP's default), each written `/ N` or `* (1/N)`;
and the SGD step written `p -= lr * grad` (as given) or `p.add_(grad, alpha=-lr)` (as
torch.optim.SGD takes it). The harness runs the course's loop each of these ways (WAYS: a
mean of ACCEPTED, an update of UPDATES), and a student's weights must equal one of them bit
for bit: no tolerance, so a reordered helper costs nothing and a real mistake still fails.
The loop is run the wrong ways the course names too (NAMED), so
that a ddp_step equal to one of them is said as such.
"""

from types import MappingProxyType

import torch
import torch.distributed as dist

ACCEPTED = ("sum / N", "sum * (1/N)", "divided first: / N", "divided first: * (1/N)")
NAMED = MappingProxyType(
    {
        "sum": "the sum of the ranks' gradients, not their mean: divide each by N "
        "(ddp_step as given)",
        "own": "this rank's own gradient, never all-reduced: all_reduce each gradient, "
        "then divide by N (ddp_step as given)",
        "own / N": "this rank's own gradient divided by N, never all-reduced: all_reduce "
        "each gradient (ddp_step as given)",
    }
)  # read-only, as every harness setting (tests/test_hidden_params.py)
UPDATES = ("p -= lr * grad", "p.add_(grad, alpha=-lr)")
WAYS = tuple((m, u) for m in ACCEPTED for u in UPDATES) + tuple(
    (m, UPDATES[0]) for m in NAMED
)


def divide(grad: torch.Tensor, way: str, n: int) -> None:
    """`grad` divided by N in place, as `way` writes it (`/ N` or `* (1/N)`)."""
    if way.endswith("* (1/N)"):
        grad *= 1 / n
    else:
        grad /= n


def sgd(param: torch.Tensor, lr: float, update: str) -> None:
    """The SGD step on `param` (no grad), written as `update`, one of UPDATES."""
    if update == UPDATES[0]:
        param -= lr * param.grad
    else:
        param.add_(param.grad, alpha=-lr)


def mean_of(grad: torch.Tensor, way: str) -> None:
    """What ddp_step makes of this rank's `grad`, one of WAYS, in place."""
    n = dist.get_world_size()
    if way.startswith("divided first"):
        divide(grad, way, n)
    if not way.startswith("own"):
        dist.all_reduce(grad)
    if way in ("own / N",) or way.startswith("sum "):
        divide(grad, way, n)


class Watch:
    """A model's steps as a loop of ddp_step takes them: each backward counted (a hook on
    its last parameter, after its gradient is accumulated) and named by the batch of
    `batches` its forward was given (None: another tensor); and the weights of each model
    it watches as it was built (a replica's start)."""

    def __init__(self, batches: list):
        self.inputs = [x for x, _ in batches]
        self.stepped, self.current, self.built = [], None, {}

    def on(self, model, built: bool = False):
        """`model`, watched (`built`: its weights kept as they are now)."""
        if built:
            self.built[id(model)] = [p.detach().clone() for p in model.parameters()]
        model.register_forward_pre_hook(self.forward)
        last = list(model.parameters())[-1]
        last.register_post_accumulate_grad_hook(self.backward)
        return model

    def forward(self, module, args) -> None:
        x = args[0] if args else None
        self.current = next((s for s, b in enumerate(self.inputs) if x is b), None)

    def backward(self, param) -> None:
        self.stepped.append(self.current)

    def start(self, model, seeded) -> dict:
        """The start of `model` if this watch saw it built: its weights' sum, and whether
        they are `seeded`'s (the weights `seed` gives); {} if make_model() did not build it."""
        first = self.built.get(id(model))
        if first is None:
            return {}
        ours = list(seeded.parameters())
        return {
            "sum": float(sum(p.double().sum() for p in first)),
            "from_seed": len(first) == len(ours)
            and all(torch.equal(a, b) for a, b in zip(first, ours)),
        }


def start_story(starts: list[dict]) -> str:
    """What every rank's start says (Watch.start, in rank order): the replicas built apart,
    or equal but not from the seed; "" if each started from the seed's weights. It names
    what differs and what the part asks, not why (the lab's broken loop prints it too, and
    the why is the student's diagnosis)."""
    if any(not s for s in starts) or all(s["from_seed"] for s in starts):
        return ""
    sums = [s["sum"] for s in starts]
    if len(set(sums)) > 1 or len({s["from_seed"] for s in starts}) > 1:
        each = ", ".join(f"{x:.6f} on rank {r}" for r, x in enumerate(sums))
        return (
            "the replicas started apart: before any step, the weights make_model() built "
            f"sum to {each}; every rank must start from the weights `seed` gives"
        )
    return (
        "the replicas started equal but not from `seed`'s weights: seed torch with "
        "`seed` just before make_model() builds them"
    )


def skip_story(stepped: list, rank: int, world_size: int, inf_steps, steps: int) -> str:
    """Which steps this rank took against the overflows (step s's: rank s mod N's batch
    holds an inf), up to the first it got wrong (after a step on an inf every loss is NaN):
    an overflow it stepped over, or a step it skipped without one; "" if none."""
    over = {s: s % world_size for s in inf_steps if s < steps}
    took, skipped = set(stepped), set()
    for s in range(steps):
        if s in over and s not in took:
            skipped.add(s)
            continue
        if s not in over and s in took:
            continue
        if s not in over:
            said = f"it skipped step {s}, where no rank's loss overflowed"
        elif over[s] == rank:
            said = f"at step {s} this rank's own loss was not finite, and it stepped"
        else:
            said = (
                f"at step {s} rank {over[s]}'s loss was not finite, and this rank "
                f"stepped: rank {over[s]}'s overflow never reached it"
            )
        if skipped and all(over[k] == 0 for k in skipped) and over.get(s, 0) != 0:
            said += (
                f" (it skipped step {min(skipped)}, where rank 0's loss overflowed: "
                "as if every rank heard rank 0's flag alone, a broadcast from rank 0)"
            )
        return (
            f"{said}. Every rank must learn of any rank's overflow and skip that step "
            "with the others: combine every rank's flag in one collective"
        )
    return ""
