"""The gradient bytes a ZeRO-2 rank holds, read from a step's report (pure Python): at
every hook under the bound (the pieces' gradients, the reduce-scatters in flight, the
open bucket), never more than max_in_flight reduce-scatters in flight (launching one
more first retires the oldest: its wait, its mean into the pieces' .grad, its buffers
freed), so the peak stays under one full set of gradients. Lab 4's memory part; the
report's fields are zerobook.labs.zero_events'.
"""

from __future__ import annotations

from zerobook.labs import bucket_events as be
from zerobook.labs.zero_events import RS, expected, padded


def moment(events: list, at: int) -> str:
    """When a measurement at events[at] was taken, in words."""
    if at < len(events) and events[at][0] == "grad":
        return f"when {events[at][1]}'s gradient arrived"
    return "after finish()" if events[at - 1] == ["finished"] else "when backward ended"


def bounds(step: dict, report: dict):
    """Each measurement: (at, bytes held, kept, the bound's parts, gradients launched,
    the reduce-scatters past their retirement whose input the student still held).
    The bound: the pieces' gradients, the reduce-scatters started and not yet due for
    retirement (input and output: the last max_in_flight started, none after finish();
    a retired one's buffers are freed) and the open bucket (padded gradients arrived and
    not yet launched)."""
    events, sizes, n = step["events"], padded(report), report["world_size"]
    most = report["max_in_flight"]
    pieces = 4 * sum(sizes.values()) // n
    numbers = {e[1]: k for k, e in enumerate(e for e in events if e[0] == RS)}
    for at, held, kept, *buffers in step["held"]:
        before = events[:at]
        started = [e[1] for e in before if e[0] == RS]
        allowed = 0 if ["finished"] in before else min(most, len(started))
        rs = [step["reduce_scatters"][numbers[i]] for i in started]
        launched = {p for r in rs for p in r["params"]}
        flight = sum(r["numel"] for r in rs[len(rs) - allowed :])
        arrived = [e[1] for e in before if e[0] == "grad" and e[1] not in launched]
        parts = (pieces, 4 * (flight + flight // n), 4 * sum(sizes[p] for p in arrived))
        allowed_ones = started[len(started) - allowed :]
        stale = [i for i in (buffers or [[]])[0] if i in started]
        stale = [numbers[i] for i in stale if i not in allowed_ones]
        yield at, held, kept, parts, launched, stale


def limit(step: dict, report: dict) -> tuple[int, int, int]:
    """The most a rank may hold: the pieces' gradients, max_in_flight of the step's
    largest bucket in flight (input and output), and the open bucket (under the cap)."""
    sizes, n = padded(report), report["world_size"]
    largest = max((sum(sizes[p] for p in b) for b in expected(step, report)), default=0)
    flight = report["max_in_flight"] * 4 * (largest + largest // n)
    return 4 * sum(sizes.values()) // n, flight, report["bucket_cap_bytes"]


def retire_problems(step: dict, report: dict) -> list[str]:
    """When a reduce-scatter starts, at most max_in_flight are in flight, itself counted:
    the oldest is retired (waited on) before one more is launched."""
    events, most = step["events"], report["max_in_flight"]
    local = {e[1]: k for k, e in enumerate(e for e in events if e[0] == RS)}
    flying: list = []
    for at, event in enumerate(events):
        if event[0] == "wait" and event[1] in flying:
            flying.remove(event[1])
        if event[0] != RS:
            continue
        flying.append(event[1])
        if len(flying) > most:
            old, new = local[flying[0]], local[event[1]]
            return [
                f"reduce-scatter {old} was still in flight when reduce-scatter {new} "
                f"started ({moment(events, last_grad(events, at))}): "
                f"{when_retired(events, at, flying[0])}; with at most {most} in flight, "
                f"launching reduce-scatter {new} first retires reduce-scatter {old} "
                "(wait on it, its mean into the pieces' .grad, its buffers freed)"
            ]
    return []


def when_retired(events: list, at: int, index: int) -> str:
    """When held reduce-scatter `index`, in flight at events[at], was waited on."""
    waited = next((w for w, e in enumerate(events) if e == ["wait", index]), None)
    if waited is None:
        return "it was never waited on"
    if ["finish"] in events[at:waited]:
        return "it was retired only in finish(), so its bucket was kept past its retirement"
    if not any(e[0] == "grad" for e in events[at:waited]):
        return (
            "it was waited on just after, in the same hook: retire first, then launch"
        )
    by = events[last_grad(events, waited)][1]
    return f"it was retired only in the hook of {by}, kept past its retirement"


def last_grad(events: list, at: int) -> int:
    """The index of the last gradient's arrival before events[at] (or `at`)."""
    return max((g for g in range(at) if events[g][0] == "grad"), default=at)


RETIRED = " (a retired bucket's buffers still held?)"


def retired(events: list) -> bool:
    """Whether a reduce-scatter had been waited on before these events ended."""
    return any(e[0] == "wait" for e in events)


def stale_words(stale: list, before: list, kept: bool) -> str:
    """Why the bytes held are over the bound, if the report says: the inputs of
    reduce-scatters past their retirement still held, or (a guess) a retired bucket's."""
    if stale:
        many = len(stale) > 1
        return (
            f"; the input{'s' * many} of reduce-scatter{'s' * many} "
            f"{be.listed(stale)} {'are' if many else 'is'} still held, past "
            f"{'their' if many else 'its'} retirement: forget a bucket's buffers "
            "when you retire it"
        )
    return RETIRED * (retired(before) and not kept)


def held_problems(step: dict, report: dict, name: str = "") -> list[str]:
    """No param.grad alive once its bucket's reduce-scatter has started; at most
    max_in_flight reduce-scatters in flight; at every hook, the gradient bytes held at
    most the bound (`bounds`), and never more than `limit`."""
    late, over, peak_at = [], [], max(step["held"], key=lambda h: h[1], default=None)
    for at, held, kept, parts, launched, stale in bounds(step, report):
        when, kept = moment(step["events"], at), [p for p in kept if p in launched]
        if kept:
            late.append(
                f"{when}, param.grad of {be.listed(kept)} still held after the "
                "reduce-scatter of its bucket started: set it to None in the hook"
            )
        if held > sum(parts):
            over.append(
                f"{when}: {held:,} bytes of gradients held; the pieces' gradients "
                f"({parts[0]:,}), the reduce-scatters in flight ({parts[1]:,}) and the "
                f"open bucket ({parts[2]:,}) make {sum(parts):,}"
                + stale_words(stale, step["events"][:at], bool(kept))
            )
    more = [f"(and {len(over) - 1} more hooks over it)"][: len(over) > 1]
    out = late[:1] + retire_problems(step, report) + over[:1] + more
    if peak_at and peak_at[1] > sum(limit(step, report)):
        out.append(peak(step, report).replace("\n", "; "))
    return out


def peak(step: dict, report: dict) -> str:
    """The most gradient bytes held in the step and when; the bound every moment must
    keep under; one full set of gradients (4 bytes x Psi), which ZeRO-2 never holds."""
    at, held, *_ = max(step["held"], key=lambda h: h[1])
    pieces, flight, cap = limit(step, report)
    full = 4 * sum(report["params"].values())
    return (
        f"peak: {held:,} bytes of gradients held {moment(step['events'], at)}\n"
        f"bound: the pieces' gradients {pieces:,} + {report['max_in_flight']} "
        f"reduce-scatters in flight (input and output) {flight:,} + the open bucket "
        f"(under the cap) {cap:,} = {pieces + flight + cap:,}\n"
        f"one full set of gradients, 4 x Psi = {full:,}: the peak is "
        f"{held / full:.0%} of it"
    )
