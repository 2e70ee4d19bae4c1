"""What Lab 4's harness reads off a student's ZeRO-2 on a rank: whose piece each master
is, the gradients a reduce-scatter's input held and in which layout, the gradient
bytes an object holds, what each piece's .grad holds after finish(), the traffic.

FSDP2's layout, which the lab asks for: a parameter p, flattened and zero-padded to
padded(p) elements (a multiple of N), is cut into N pieces of padded(p)/N; rank r owns
piece r of every parameter. A bucket's reduce-scatter input is laid out rank-major:
piece 0 of each of its gradients (in the order they arrived), then every piece 1, ...,
so that rank r receives the sum of its pieces, (N, k) for k = sum of padded(p)/N.
"""

from __future__ import annotations


import torch
import torch.distributed as dist

from zerobook.train import measure


RS = "reduce_scatter_tensor"
NUMBERED = ("all_reduce", RS, "all_gather_into_tensor", "wait")  # events with an index
ALL_GATHER = dist.all_gather_into_tensor  # the harness's own, never a wrapper
MEANS = {  # the usual ways to take the mean of N gradients (one rounding apart for N = 3)
    "sum / N": lambda grads, n: ordered(grads) / n,
    "sum * (1/N)": lambda grads, n: ordered(grads) * (1 / n),
    "(grad / N) summed": lambda grads, n: ordered([g / n for g in grads]),
}


def padded(tensor: torch.Tensor, n: int) -> torch.Tensor:
    """`tensor` flattened, zero-padded to a multiple of n: padded(p) elements."""
    flat = tensor.detach().reshape(-1)
    return torch.cat([flat, flat.new_zeros(-flat.numel() % n)])


def ordered(grads: list) -> torch.Tensor:
    """((g0 + g1) + g2) + ...: the ranks' gradients summed in rank order."""
    total = grads[0].clone()
    for grad in grads[1:]:
        total += grad
    return total


def optimizer_state(optimizer, keys: set | None = None) -> list[torch.Tensor]:
    """The tensors an optimizer keeps: its parameters (the master pieces), their state under
    the optimizer's own keys (measure.state_keys; a tensor the student's code filed there
    under another key is the student's)."""
    masters = [p for group in optimizer.param_groups for p in group["params"]]
    return masters + list(measure.own_optimizer_tensors(optimizer, keys))


def state_bytes(optimizer) -> int:
    """Bytes of the master pieces and the optimizer's state, each storage once."""
    return measure.unique_bytes(optimizer_state(optimizer))


def find_optimizer(zero, optimizer_class):
    """The optimizer_class instance the student's object keeps (one attribute deep)."""
    found = [v for v in vars(zero).values() if isinstance(v, optimizer_class)]
    if len(found) != 1:
        raise RuntimeError(
            f"your Zero2 keeps {len(found)} {optimizer_class.__name__} optimizers as "
            "attributes; keep exactly one, over the master pieces"
        )
    return found[0]


def identify(optimizer, model, me) -> tuple[list[dict], list]:
    """Each master of the optimizer (in its groups' order), described: the parameter it
    is a piece of and which piece, or what else it is; and the names, None if unknown."""
    named = {name: padded(p, me.world_size) for name, p in model.named_parameters()}
    whole = {name: p.detach().reshape(-1) for name, p in model.named_parameters()}
    flat = padded(torch.cat(list(whole.values())), me.world_size)
    share = flat.view(me.world_size, -1)[me.rank]  # one flat buffer, cut contiguously
    out, names = [], []
    for group in optimizer.param_groups:
        for master in group["params"]:
            found = describe(master.detach(), named, whole, share, me.world_size)
            found |= {"numel": master.numel(), "dtype": str(master.dtype)}
            found["weight_decay"] = group.get("weight_decay", 0.0)
            out.append(found)
            names.append(found.get("param") if "piece" in found else None)
    return out, names


def describe(master, named: dict, whole: dict, share, n: int) -> dict:
    """{"param", "piece"}, {"param", "strided"} (elements r, r + N, ...: a column of
    view(-1, N)), {"param", "whole": True}, {"flat_share": True} or {}."""
    if master.dtype != torch.float32:
        return {}
    flat = master.reshape(-1)
    for name, full in named.items():
        pieces = full.view(n, -1)
        if flat.numel() == pieces.shape[1]:
            match = [r for r in range(n) if torch.equal(flat, pieces[r])]
            if match:
                return {"param": name, "piece": match[0]}
    for name, full in named.items():  # every N-th element: a column, not a piece
        columns = full.view(-1, n)
        if flat.numel() == columns.shape[0]:
            match = [r for r in range(n) if torch.equal(flat, columns[:, r])]
            if match:
                return {"param": name, "strided": match[0]}
    for name, full in whole.items():
        if torch.equal(flat, full.float()):
            return {"param": name, "whole": True}
    return {"flat_share": True} if torch.equal(flat, share) else {}


@torch.no_grad()
def rank_gradients(params: dict, grads: dict, me) -> dict[str, list]:
    """Every rank's gradients as they arrived: name -> N tensors, in rank order."""
    mine = torch.cat([grads[name].reshape(-1) for name in params])
    parts = torch.empty(me.world_size * mine.numel(), device=mine.device)
    ALL_GATHER(parts, mine)
    rows = parts.view(me.world_size, -1)
    sizes = [p.numel() for p in params.values()]
    split = [row.split(sizes) for row in rows]
    return {name: [s[i] for s in split] for i, name in enumerate(params)}


def held(tensor, grads: dict, order: list[str], n: int) -> dict:
    """The gradients a reduce-scatter's input held, in its order, and its layout:
    "rank-major" (every piece 0, then every piece 1, ...), "parameter by parameter"
    (each gradient whole, padded) or None (`unmatched`: where nothing matched)."""
    flat = tensor.detach().reshape(-1)
    for layout in ("rank-major", "parameter by parameter"):
        found = parse(flat, grads, order, n, layout)
        if found["unmatched"] is None:
            return found | {"layout": layout}
    return parse(flat, grads, order, n, "rank-major") | {"layout": None}


def parse(flat, grads: dict, order: list[str], n: int, layout: str) -> dict:
    """Gradients matched one after another, the next to arrive tried first."""
    names, offset = [], 0
    rank_major = layout == "rank-major" and flat.numel() % n == 0
    view = flat.view(n, -1) if rank_major else flat.view(1, -1)
    while offset < view.shape[1]:
        start = order.index(names[-1]) + 1 if names else 0
        candidates = [g for g in order[start:] + order[:start] if g not in names]
        match = next((g for g in candidates if fits(view, offset, grads[g], n)), None)
        if match is None:
            return {"params": names, "numel": flat.numel(), "unmatched": offset}
        names.append(match)
        offset += padded(grads[match], n).numel() // view.shape[0]
    return {"params": names, "numel": flat.numel(), "unmatched": None}


def fits(view, offset: int, grad, n: int) -> bool:
    """Whether columns offset... of `view` (N rows, or 1) hold `grad`, padded, or its
    N-th (a mean taken before the sum)."""
    full = padded(grad, n)
    k = full.numel() // view.shape[0]
    block = view[:, offset : offset + k]
    if block.shape[1] != k:
        return False
    scaled = (full, full / n, full * (1 / n))
    return any(torch.equal(block, s.view(view.shape[0], -1)) for s in scaled)


@torch.no_grad()
def piece_verdicts(optimizer, names: list, per_rank: dict, me) -> dict:
    """What each master piece's .grad holds after finish(): "mean" (of the ranks'
    gradients, this rank's piece), "sum", "own" (this rank's gradient), "own_mean",
    "other_rank" (another rank's piece of the mean), "none" or "other"; and the usual
    means every piece matches (the reference averages the same way)."""
    n, r = me.world_size, me.rank
    masters = [p for group in optimizer.param_groups for p in group["params"]]
    out, means = {}, set(MEANS)
    for master, name in zip(masters, names):
        if name is None:
            continue
        grads = [padded(g, n).view(n, -1) for g in per_rank[name]]
        mean = {way: f(grads, n) for way, f in MEANS.items()}
        grad = master.grad
        out[name] = verdict(grad, mean, grads, n, r)
        means &= {w for w, m in mean.items() if grad is not None and same(grad, m[r])}
    return {"grads": out, "means": sorted(means) if out else []}


def same(grad, piece) -> bool:
    return grad.numel() == piece.numel() and torch.equal(grad.reshape(-1), piece)


def verdict(grad, mean: dict, grads: list, n: int, r: int) -> str:
    """One master piece's gradient, in a word (see piece_verdicts)."""
    if grad is None:
        return "none"
    if any(same(grad, m[r]) for m in mean.values()):
        return "mean"
    if same(grad, ordered(grads)[r]):
        return "sum"
    if same(grad, grads[r][r]):
        return "own"
    if any(same(grad, grads[r][r] / d) for d in (n,)):
        return "own_mean"
    others = [q for q in range(n) if q != r]
    if any(same(grad, m[q]) for m in mean.values() for q in others):
        return "other_rank"
    return "other"


def traffic(events) -> dict:
    """A step's collectives: op -> {"calls", "elements"} (bus bytes / 4, nccl-tests')."""
    out: dict = {}
    for event in events:
        entry = out.setdefault(event.op, {"calls": 0, "elements": 0.0})
        entry["calls"] += 1
        entry["elements"] += (event.bus_bytes or event.bytes) / 4
    return out


def difference(model, reference) -> dict:
    """The largest difference of the weights, the parameter it is in, and how many of
    that parameter's elements differ at all."""
    worst = {"diff": 0.0, "worst": None, "elements": 0}
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        gap = (p.detach() - q.detach()).abs()
        if gap.max().item() > worst["diff"]:
            worst = {
                "diff": gap.max().item(),
                "worst": name,
                "elements": int(gap.gt(0).sum()),
            }
    return worst
