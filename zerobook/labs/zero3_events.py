"""Lab 5's checks, pure Python: read the report of the one run of zerobook.labs.zero3 and
return the problems found, each a sentence that names the parameter, unit or collective.

A step's events, in order (held collectives numbered from 0 in the step):
    [op, i, async_op, unit, numel, finite]
                                     op: all_gather_into_tensor, reduce_scatter_tensor or
                                     all_reduce; unit: whose pieces (or gradients) its input
                                     holds, None if no unit's; finite: no NaN or inf in it
    ["wait", i]                      the i-th collective's handle waited on
    ["computed", unit]               the unit's forward has run (the root's: the model's)
    ["backward"], ["step"]           loss.backward() starts; it has returned
    ["backward done", unit]          the unit's last gradient has arrived
"""

import itertools

GATHER, REDUCE = "all_gather_into_tensor", "reduce_scatter_tensor"


def padded(numel: int, world_size: int) -> int:
    """numel rounded up to a multiple of N: a parameter cut in N equal pieces."""
    return -(-numel // world_size) * world_size


def unit_sizes(report: dict) -> dict:
    """Unit -> (elements padded, bytes of its full parameters)."""
    n, size, params = report["world_size"], report["element_size"], report["params"]
    return {
        unit: (
            sum(padded(params[p]["numel"], n) for p in names),
            sum(params[p]["numel"] * size for p in names),
        )
        for unit, names in report["units"].items()
    }


def blocks(report: dict) -> list[str]:
    return [unit for unit in report["units"] if unit != "root"]


def listed(names: list[str], most: int = 3) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def check_parity(report: dict) -> list[str]:
    """The first step whose forward used weights other than one process's; why, if the
    optimizer's groups say so."""
    p = report["parity"]
    if p["step"] is None:
        return []
    found = [
        (
            f"the forward of step {p['step']} used weights off one process's: "
            f"{p['worst']} off most (by {p['diff']:.1e})"
        )
    ]
    if p.get("summed"):
        found.append(
            "they are the weights of the gradients' sum, not their mean: divide each "
            f"reduce-scattered gradient by the world size ({report['world_size']})"
        )
    if p.get("divided_first"):
        found.append(
            "they are the weights of gradients divided by the world size before the "
            "reduce-scatter summed them: this lab asks for the sum first and the mean "
            "after it, so that the arithmetic is one process's bit for bit (g0/N + g1/N "
            "+ g2/N is not (g0 + g1 + g2)/N in floating point): divide after the wait"
        )
    if p["missing"]:
        found.append(f"{listed(p['missing'])}: never seen computing")
    if p["step"] == 0:
        found.append(
            "no update has happened yet: the gathered weights are not the model's (a "
            "gather's buffer read before its wait() holds NaN here: no part of it has "
            "arrived)"
        )
    return found + unwaited(report) + check_groups(report)


def unwaited(report: dict) -> list[str]:
    """Asynchronous reduce-scatters never waited on, in the first step that has any:
    their output holds NaN (zerobook.data_parallel.inflight)."""
    for s, step in enumerate(report["steps"]):
        events = step["events"]
        waited = {e[1] for e in events if e[0] == "wait"}
        units = [e[3] or f"reduce-scatter {e[1]}" for e in events
                 if e[0] == REDUCE and e[2] and e[1] not in waited]  # fmt: skip
        if units:
            return [
                f"in step {s}, the gradients' reduce-scatter of {listed(units)} was "
                "never waited on (async_op=True): its output holds NaN here (no part of "
                "it has arrived); "
                "wait on each handle before you read its output"
            ]
    return []


def check_groups(report: dict) -> list[str]:
    """The optimizer's groups against AdamW with weight decay on every tensor of 2 or more
    dimensions and none on 1-D ones (biases, norms)."""
    dims, options, found = report["params"], report["options"], []
    for group in report["groups"]:
        names = group["params"]
        if group["weight_decay"]:
            flat = [n for n in names if dims[n]["dim"] < 2]
            found += [f"weight decay on 1-D {listed(flat)}"] if flat else []
            if group["weight_decay"] != options["weight_decay"]:
                found.append(f"weight decay {group['weight_decay']} instead of "
                             f"{options['weight_decay']}")  # fmt: skip
        else:
            matrices = [n for n in names if dims[n]["dim"] >= 2]
            found += [f"no weight decay on {listed(matrices)}"] if matrices else []
        if group["lr"] != options["lr"]:
            found.append(f"learning rate {group['lr']} instead of {options['lr']}")
    return found


def check_kept(step: dict, report: dict) -> list[str]:
    """After step(): piece r of every parameter kept (fp32 master, its grad, AdamW's
    state, 16 bytes an element), every unit's full parameters and gradients freed."""
    kept, layout, found = step["kept"], report["layout"], []
    lost = [n for n in report["params"] if n not in layout["found"]]
    if lost:
        found.append(
            f"no master tensor is piece r of {listed(lost)}: flatten each parameter, "
            "zero-pad it to a multiple of N, cut it in N equal pieces; rank r keeps piece r"
        )
    for unit, held in kept["full parameters"].items():
        if held:
            found.append(f"{unit} is still gathered after step(): {held:,} bytes of "
                         "full parameters (free it once its backward is done)")  # fmt: skip
    grads = kept["full gradients"]
    if grads:
        found.append(f"the full gradients of {listed(sorted(grads))} are still held after "
                     f"step() ({sum(grads.values()):,} bytes): free them once "
                     "reduce-scattered")  # fmt: skip
    pieces = (
        sum(size for size, _ in unit_sizes(report).values()) // report["world_size"]
    )
    each = pieces * report["element_size"]
    expected = {"masters": [each], "master grads": [each, 0],
                "state": [2 * each + 4 * kept["counters"]]}  # fmt: skip
    for what, allowed in expected.items():
        if kept[what] not in allowed:
            found.append(f"{what}: {kept[what]:,} bytes, expected {allowed[0]:,} "
                         f"({allowed[0] // pieces} bytes x {pieces:,} elements of pieces)")  # fmt: skip
    if kept["other"]:
        found.append(f"your code holds {kept['other']:,} more bytes of tensors between steps "
                     "(in its object, its file's globals or its hooks): keep only the pieces, "
                     "their gradients and the optimizer")  # fmt: skip
    return found


def check_peak(step: dict, report: dict) -> list[str]:
    """At most the root and two blocks' full parameters allocated at once."""
    sizes = unit_sizes(report)
    bound = sizes["root"][1] + 2 * max(sizes[b][1] for b in blocks(report))
    peak = step["peak"]
    if peak["bytes"] <= bound:
        return []
    return [
        (
            f"at {' '.join(peak['at'])}, {listed(peak['units'], 8)} were gathered at once: "
            f"{peak['bytes']:,} bytes of full parameters, more than the root and two blocks "
            f"({bound:,}): free each block after its forward and after its backward"
        )
    ]


def sent(events: list, world_size: int) -> float:
    """Elements this rank sent: an all-gather N-1 times its input, a reduce-scatter
    (N-1)/N of its input, an all-reduce twice that."""
    share = (world_size - 1) / world_size
    per = {GATHER: world_size - 1, REDUCE: share, "all_reduce": 2 * share}
    return sum(e[4] * per[e[0]] for e in events if e[0] in per)


def expected_sent(report: dict) -> float:
    """(2 x blocks + root + all) x (N-1)/N padded elements: what a rank sends a step."""
    n = report["world_size"]
    times = {unit: 2 if unit == "root" else 3 for unit in report["units"]}
    return sum(s * (n - 1) / n * times[u] for u, (s, _) in unit_sizes(report).items())


def check_traffic(step: dict, report: dict) -> list[str]:
    """Each block gathered twice, the root once, every unit's gradients reduce-scattered
    once, each in one collective: (2 blocks + root + all) (N-1)/N padded elements. A step
    whose collectives carried NaN that no unit's values match is not checked: which unit
    each carried cannot be told (a mistake upstream, which its own test names)."""
    events, n, found = step["events"], report["world_size"], []
    held = [e for e in events if e[0] in (GATHER, REDUCE, "all_reduce")]
    if any(e[3] is None and not e[5] for e in held):
        return []  # values gone NaN upstream (the forward test says why): not told apart
    for unit in report["units"]:
        want = 1 if unit == "root" else 2
        got = sum(e[0] == GATHER and e[3] == unit for e in held)
        if got != want:
            found.append(f"{unit} was gathered {got} time(s), expected {want} "
                         "(a block in forward and in backward; the root once)")  # fmt: skip
        got = sum(e[0] == REDUCE and e[3] == unit for e in held)
        if got != 1:
            found.append(
                f"{unit}'s gradients were reduce-scattered {got} time(s), not once"
            )
    for e in held:
        if e[3] is None:
            what = "pieces" if e[0] == GATHER else "gradients"
            found.append(f"{e[0]} {e[1]} ({e[4]:,} elements) holds no unit's {what}: one "
                         f"collective per unit, of all its parameters' {what}")  # fmt: skip
    others = sorted(
        {e[0] for e in events if len(e) == 1 and e[0] not in ("backward", "step")}
    )
    found += [f"collectives not expected: {', '.join(others)}"] if others else []
    want = expected_sent(report)
    if sent(events, n) != want:
        found.append(f"{sent(events, n):,.0f} elements sent by this rank, expected "
                     f"{want:,.0f} = (2 x blocks + root + all) x (N-1)/N, padded")  # fmt: skip
    return found


def check_forward(step: dict, report: dict) -> list[str]:
    """Forward prefetch: block k+1's all-gather issued before block k has computed,
    asynchronous, waited on after block k and before block k+1 computed."""
    events = step["events"]
    end = events.index(["backward"])
    names = blocks(report)
    return [p for cur, nxt in itertools.pairwise(names)
            for p in prefetch(events[:end], 0, ["computed", cur], nxt, ["computed", nxt],
                              f"{cur} had computed", "forward pre-hook")]  # fmt: skip


def check_backward(step: dict, report: dict) -> list[str]:
    """Backward prefetch: block k-1's backward all-gather issued before block k's backward
    is done, asynchronous, waited on after it."""
    events = step["events"]
    start = events.index(["backward"])
    names = blocks(report)[::-1]
    return [p for cur, prev in itertools.pairwise(names)
            for p in prefetch(events, start, ["backward done", cur], prev,
                              ["backward done", prev], f"{cur}'s backward had finished",
                              "backward pre-hook")]  # fmt: skip


def prefetch(events, start, current, unit, own, after: str, hook: str) -> list[str]:
    """The first all-gather of `unit` from `start` on: issued before the `current` event,
    asynchronous, waited on between it and the `own` event."""
    where = [
        i
        for i, e in enumerate(events)
        if i >= start and e[0] == GATHER and e[3] == unit
    ]
    if not where:
        unknown = [e for e in events[start:] if e[0] == GATHER and e[3] is None]
        if any(not e[5] for e in unknown):
            return []  # NaN no unit's values match (a mistake upstream): not told apart
        why = " (some all-gather held no unit's pieces: see traffic)" if unknown else ""
        return [f"{unit} was not gathered{' in backward' if start else ''}{why}"]
    issued, (_, index, in_flight, *_) = where[0], events[where[0]]
    done, computed = events.index(current), events.index(own) if own in events else None
    if issued > done:
        return [(f"{unit}'s all-gather was issued only after {after}: start it in the "
                f"{hook} of the unit before it (prefetch)")]  # fmt: skip
    if not in_flight:
        return [(f"{unit}'s all-gather was blocking (async_op=False): it did not travel "
                f"while the unit before it computed")]  # fmt: skip
    waits = [i for i, e in enumerate(events) if e == ["wait", index]]
    if not waits:
        return [(f"{unit}'s all-gather was never waited on: wait on its handle before "
                f"{unit} computes")]  # fmt: skip
    if waits[0] < done:
        return [(f"{unit}'s all-gather was waited on before {after}: wait in {unit}'s own "
                f"{hook}, so it travels meanwhile")]  # fmt: skip
    if computed is not None and waits[0] > computed:
        return [f"{unit}'s all-gather was waited on only after {unit} had computed"]
    return []


def timeline(step: dict) -> str:
    """The step's events, one a line."""
    return "\n".join(" ".join(str(x) for x in e) for e in step["events"])
