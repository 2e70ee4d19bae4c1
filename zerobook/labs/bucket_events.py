"""A data-parallel step read from its events: the buckets it should send, what each
all-reduce held, what was in flight while backward went on (pure Python, no torch).

A step, as the DDP lab's harness (zerobook.labs.ddp) reports it:
    events       [["grad", name], ["all_reduce", i, async_op], ["wait", i], ["finish"],
                 ["finished"], ...] in the order they happened on the rank: "grad" when
                 a gradient was accumulated (before the DDP's own hook ran), "finish"
                 and "finished" around the DDP's finish(), i counting the all-reduces
    all_reduces  per all-reduce: {"params": the gradients its tensor held, in order,
                 "numel", "unmatched": where it stopped holding gradients, or None}
    grads        name -> what param.grad held after finish(): "mean", "sum", "own"
                 (this rank's gradient), "own_mean" (it divided by N), "none", "other"
Each check returns the problems it found, in words naming the gradient or all-reduce.
"""

from __future__ import annotations

import textwrap

SHOWN = 3  # names listed before "and k more"
PHASES = {"finish": "finish() begins", "finished": "finish() returns"}
GRAD_WORDS = {
    "sum": "hold the sum of the ranks' gradients, not their mean "
    "(divide by the world size after wait())",
    "own": "hold this rank's own gradient: read before wait() returned, "
    "or never copied back",
    "own_mean": "hold this rank's own gradient divided by the world size: the sum had "
    "not arrived (wait() before reading the bucket)",
    "none": "have no gradient",
    "other": "hold neither the ranks' mean gradient nor their sum",
}


def expected_buckets(
    arrivals: list[str], numels: dict[str, int], element_size: int, cap_bytes: int
) -> list[list[str]]:
    """Gradients in the order they arrived, cut into buckets: a bucket is full, and
    sent, as soon as it holds at least cap_bytes; the last holds what is left."""
    buckets, current, size = [], [], 0
    for name in arrivals:
        current.append(name)
        size += numels[name] * element_size
        if size >= cap_bytes:
            buckets.append(current)
            current, size = [], 0
    return buckets + ([current] if current else [])


def arrivals(step: dict) -> list[str]:
    """The gradients in the order backward produced them."""
    return [event[1] for event in step["events"] if event[0] == "grad"]


def expected(step: dict, report: dict) -> list[list[str]]:
    """The buckets of a step, from its arrivals and the report's sizes and cap."""
    sizes = report["params"], report["element_size"], report["bucket_cap_bytes"]
    return expected_buckets(arrivals(step), *sizes)


def listed(names: list, more: int = SHOWN) -> str:
    """'a, b, c and 4 more'."""
    names = [str(n) for n in names]
    rest = f" and {len(names) - more} more" if len(names) > more else ""
    return ", ".join(names[:more]) + rest


def described(names: list[str], numels: dict[str, int]) -> str:
    """'6 gradients, ln_f.weight ... blocks.2.mlp.0.weight, 8,416 elements'."""
    if not names:
        return "no gradient"
    ends = names[0] if len(names) == 1 else f"{names[0]} ... {names[-1]}"
    total = sum(numels.get(n, 0) for n in names)
    return f"{len(names)} gradient{'s' * (len(names) > 1)}, {ends}, {total:,} elements"


def check_once(step: dict, params: list[str]) -> list[str]:
    """Every gradient in exactly one all-reduce of the step, as backward produced it."""
    problems, held = [], {}
    for i, reduce in enumerate(step["all_reduces"]):
        for name in reduce["params"]:
            held.setdefault(name, []).append(i)
        if reduce["unmatched"] is not None:
            problems.append(
                f"all-reduce {i}'s tensor, from element {reduce['unmatched']:,} on, is "
                "no gradient as backward produced it (changed before the all-reduce?)"
            )
    missing = [name for name in params if name not in held]
    if missing:
        problems.append(f"in no all-reduce: {listed(missing)}")
    for name in params:
        if len(held.get(name, [])) > 1:
            times = f"{len(held[name])} times (all-reduces {listed(held[name])})"
            problems.append(f"{name} was all-reduced {times}")
    return problems


def check_buckets(
    step: dict, expected: list[list[str]], numels: dict[str, int]
) -> list[str]:
    """The all-reduces, in the order they started, are the expected buckets, each laid
    out in the order its gradients arrived: each one that is not, named."""
    actual = [reduce["params"] for reduce in step["all_reduces"]]
    problems = []
    for k, (mine, want) in enumerate(zip(actual, expected)):
        if mine != want:
            held, bucket = described(mine, numels), described(want, numels)
            problems.append(
                f"all-reduce {k} held {held}; bucket {k} is {bucket}: "
                + why(mine, want)
            )
    if len(actual) != len(expected):
        problems.append(
            f"{len(actual)} all-reduces in the step; {len(expected)} buckets expected"
        )
    return problems


def why(mine: list[str], want: list[str]) -> str:
    """Where an all-reduce's gradients part from its bucket's, in words."""
    if sorted(mine) == sorted(want):
        return "the same gradients in another order (lay them out as they arrive)"
    j = next((j for j, (a, b) in enumerate(zip(mine, want)) if a != b), None)
    if j is not None:
        after = f"after {want[j - 1]}" if j else "first"
        nxt = f"{want[j]}, the next gradient backward produced"
        return f"{after} comes {nxt}, not {mine[j]}"
    if len(mine) < len(want):
        return f"closed early, before {want[len(mine)]} (not yet at the cap)"
    return f"not closed after {want[-1]}, when it held at least the cap"


def check_overlap(step: dict, buckets: int) -> list[str]:
    """All but the last all-reduce start during backward, asynchronously, in the hook of
    their last gradient, and are still in flight when a later gradient arrives."""
    events = step["events"]
    finish = next((at for at, e in enumerate(events) if e[0] == "finish"), len(events))
    reduces = [(at, e[1], e[2]) for at, e in enumerate(events) if e[0] == "all_reduce"]
    during = sum(at < finish for at, _, _ in reduces)
    problems = []
    if during < buckets - 1:
        problems.append(
            f"{during} all-reduce(s) started during backward; of {buckets} buckets, "
            f"the first {buckets - 1} must start while backward goes on"
        )
    for at, i, async_op in reduces[:-1]:
        problems += in_flight_problems(step, at, i, async_op, finish)
    return problems


def in_flight_problems(step: dict, at: int, i: int, async_op: bool, finish: int):
    """What kept all-reduce `i` (event `at`) from overlapping the rest of backward."""
    events = step["events"]
    if not async_op:
        return [
            f"all-reduce {i} was blocking (async_op=False): backward stopped for it"
        ]
    if at > finish:
        return [f"all-reduce {i} started only in finish(), after backward: no overlap"]
    waited = next(
        (w for w, e in enumerate(events) if e[:2] == ["wait", i]), len(events)
    )
    grads = [g for g, e in enumerate(events) if e[0] == "grad"]
    if not any(at < g < waited for g in grads):
        return [
            f"all-reduce {i} was waited on at once, before any later gradient arrived: "
            "not in flight while backward went on"
        ]
    held = step["all_reduces"][i]["params"] if i < len(step["all_reduces"]) else []
    members = [g for g in grads if events[g][1] in held]
    late = [events[g][1] for g in grads if members and max(members) < g < at]
    if late:
        return [
            f"all-reduce {i} started late: {listed(late)} arrived after its last "
            "gradient (start a bucket in the hook that fills it)"
        ]
    return []


def check_waits(step: dict) -> list[str]:
    """One wait per asynchronous all-reduce of the step (none on an earlier step's),
    then every gradient the ranks' mean."""
    events = step["events"]
    waits: dict = {}
    for event in events:
        if event[0] == "wait":
            waits[event[1]] = waits.get(event[1], 0) + 1
    problems = []
    if not any(event[0] == "all_reduce" for event in events):
        problems.append(
            "no dist.all_reduce in the step: its gradients went another way"
        )
    for event in events:
        n = waits.get(event[1], 0) if event[0] == "all_reduce" and event[2] else 1
        if n != 1:
            more = " (its sum never arrived)" if n == 0 else ", not once"
            problems.append(f"all-reduce {event[1]} was waited on {n} times{more}")
    stale = sum(n for i, n in waits.items() if i < 0)
    if stale:
        problems.append(
            f"{stale} wait(s) on all-reduces of an earlier step: forget a "
            "step's handles once finish() has used them"
        )
    return problems + gradient_problems(step["grads"])


def gradient_problems(grads: dict) -> list[str]:
    """Each param.grad not holding the ranks' mean after finish(), by what it holds."""
    by_kind: dict = {}
    for name, verdict in grads.items():
        if verdict not in (
            "mean",
            "divided_mean",
        ):  # the parity test explains the second
            by_kind.setdefault(verdict, []).append(name)
    problems = []
    for verdict, names in by_kind.items():
        words = GRAD_WORDS.get(verdict, verdict)
        if len(names) == 1:  # hold -> holds, have -> has
            words = {"hold": "holds", "have": "has"}[words.split()[0]] + words[4:]
        problems.append(f"after finish(), {listed(names)} {words}")
    return problems


def parity_hint(report: dict) -> str:
    """Why the weights are off one process's: the gradients divided before the all-reduce
    (what PyTorch's DDP does), or "the tests below say why"."""
    steps = report["steps"]
    if not (steps and steps[0]["average"] == "divided first"):
        return "the tests below say why"
    n = report.get("world_size", "N")
    return (
        f"each all-reduce held the gradients already divided by the world size ({n}), as "
        "PyTorch's DistributedDataParallel divides them by default; this lab asks for the "
        "sum first and the mean after it, so that the arithmetic is one process's, bit for "
        "bit (g0/N + g1/N + g2/N is not (g0 + g1 + g2)/N in floating point): divide after "
        "wait()"
    )


def timeline(step: dict, width: int = 88) -> str:
    """The step's events in words: '6 gradients, all-reduce 0 starts, ...'."""
    words, run = [], 0
    for event in step["events"] + [["end"]]:
        if event[0] == "grad":
            run += 1
            continue
        if run:
            words.append(f"{run} gradient{'s' * (run > 1)}")
            run = 0
        if event[0] == "all_reduce":
            blocking = "" if event[2] else " (blocking)"
            words.append(f"all-reduce {event[1]} starts{blocking}")
        elif event[0] == "wait":
            words.append(f"wait {event[1]}")
        elif event[0] != "end":
            words.append(PHASES.get(event[0], event[0]))
    return textwrap.fill(", ".join(words), width, break_on_hyphens=False)
