"""A ZeRO-2 step in FSDP2's layout read from its events: whose pieces the optimizer
holds, the gradient bytes held at each hook, the reduce-scatters' buckets and overlap,
the traffic (pure Python, no torch). Lab 4's checks; the rules a bucketed reduction
shares with DDP's are zerobook.labs.bucket_events', said of reduce-scatters.

A rank's report (zerobook.labs.zero): "params" (name -> numel), "dims", "world_size",
"bucket_cap_bytes", "element_size", and per optimizer in "runs": "masters" (each
described: {"param", "piece"}, {"param", "strided"}, {"param", "whole"},
{"flat_share"} or {}, with "numel" and "weight_decay"), "parity" and "steps", a step
holding "events" (["grad", name], [collective, i, async_op], ["wait", i], ["finish"],
["finished"], ["stepped"] in order), "reduce_scatters" (the gradients each input held: "params", "layout",
"numel", "unmatched"), "held" ([at, bytes, kept, buffers]: gradient bytes held when
events[at] came, the param.grads alive but the arriving one, the reduce-scatters whose
input the student's object still held), "pieces" ({"grads": name -> what its piece's
.grad held after finish()}), "traffic" (op -> {"calls", "elements"}), "stepped" (False:
step() raised, so the traffic is the reduce-scatters' alone and the step holds no
"optimizer_bytes") and "optimizer_bytes"; "max_in_flight": how many reduce-scatters may be in flight at once.
Each check returns its problems, naming the parameter or bucket; the gradient bytes
held are zerobook.labs.zero_held's.
"""

from __future__ import annotations

import textwrap

from zerobook.labs import bucket_events as be

RS = "reduce_scatter_tensor"
# bytes of state per element, and per parameter (a step counter), of the optimizers
STATE = {"AdamW": (8, 4), "SGD": (4, 0)}
PIECE_WORDS = {
    "sum": "the sum of the ranks' gradients, not their mean (divide by N)",
    "own": "this rank's own gradient: read before wait() returned",
    "own_mean": "this rank's own gradient divided by N: the sum had not arrived",
    "other_rank": "another rank's piece of the mean (rank r receives piece r)",
    "none": "no gradient",
    "other": "neither the ranks' mean gradient nor their sum",
}


def padded(report: dict) -> dict[str, int]:
    """name -> padded(p): numel rounded up to a multiple of the world size."""
    n = report["world_size"]
    return {name: -(-numel // n) * n for name, numel in report["params"].items()}


def in_words(problems: list[str]) -> list[str]:
    """bucket_events' sentences, said of reduce-scatters."""
    return [
        p.replace("dist.all_reduce", f"dist.{RS}").replace(
            "all-reduce", "reduce-scatter"
        )
        for p in problems
    ]


def as_reduced(step: dict) -> dict:
    """The step as bucket_events reads a DDP step: its reduce-scatters as the
    all-reduces (numbered 0, 1, ... in order), their waits, nothing else held."""
    local = {e[1]: k for k, e in enumerate(e for e in step["events"] if e[0] == RS)}
    events = []
    for event in step["events"]:
        if event[0] == RS:
            events.append(["all_reduce", local[event[1]], event[2]])
        elif event[0] == "wait" and (event[1] in local or event[1] < 0):
            events.append(["wait", local.get(event[1], -1)])
        elif event[0] in ("grad", "finish", "finished"):
            events.append(event)
    return {"events": events, "all_reduces": step["reduce_scatters"], "grads": {}}


def expected(step: dict, report: dict) -> list[list[str]]:
    """The step's buckets: gradients in arrival order, cut at the cap (padded bytes)."""
    sizes = padded(report), report["element_size"], report["bucket_cap_bytes"]
    return be.expected_buckets([e[1] for e in step["events"] if e[0] == "grad"], *sizes)


def first_problems(reports: list, check, ranks=(0,)) -> list[str]:
    """check(step, report, optimizer) on every step of each optimizer and rank: the
    problems of the first that has any, each naming rank, optimizer and step."""
    found = [
        (r, name, s, problems)
        for r in ranks
        for name, run in reports[r]["runs"].items()
        for s, step in enumerate(run["steps"])
        if (problems := check(step, reports[r], name))
    ]
    if not found:
        return []
    rank, name, step, problems = found[0]
    more = [f"(and {len(found) - 1} more step(s) with problems)"][: len(found) - 1]
    return [f"rank {rank}, {name}, step {step}: {p}" for p in problems] + more


def parity_problems(report: dict, name: str) -> list[str]:
    """The weights after the run against one process's, and why they differ if a
    reason is known: weight decay on 1-D tensors, or none on matrices."""
    parity, dims = report["runs"][name]["parity"], report["dims"]
    if parity["diff"] == 0:
        return []
    out = [f"{name}: {parity['worst']} is off most (by {parity['diff']:.1e})"]
    masters = [m for m in report["runs"][name]["masters"] if "param" in m]
    decayed = [
        m["param"] for m in masters if dims[m["param"]] == 1 and m["weight_decay"]
    ]
    if decayed or parity.get("decay_1d", {}).get("diff", 1) == 0:
        out.append(
            f"weight decay on 1-D tensor(s) {be.listed(decayed)}: biases and "
            "LayerNorm weights take none (a group of their own, weight_decay=0)"
        )
    bare = [
        m["param"] for m in masters if dims[m["param"]] > 1 and not m["weight_decay"]
    ]
    if bare:
        out.append(f"no weight decay on {be.listed(bare)}, which the options ask for")
    return out + ["the tests below say what else is wrong"][: len(out) == 1]


def layout_problems(report: dict, name: str, rank: int) -> list[str]:
    """Each master is piece `rank` of one parameter, one per parameter, in fp32."""
    masters, out = report["runs"][name]["masters"], []
    strided = [m for m in masters if "strided" in m]
    for m in masters:
        out += [] if "strided" in m else master_problem(m, rank)
    if strided:
        out.append(strided_words(strided, rank))
    pieces = [m["param"] for m in masters if m.get("piece") == rank]
    missing = [p for p in report["params"] if p not in pieces]
    twice = sorted({p for p in pieces if pieces.count(p) > 1})
    if missing and not out:
        out.append(f"no master piece for {be.listed(missing)}")
    if twice:
        out.append(f"more than one master piece for {be.listed(twice)}")
    return out


def master_problem(master: dict, rank: int) -> list[str]:
    """What is wrong with one master (nothing if it is piece `rank` of a parameter)."""
    size = f"a master of {master['numel']:,} elements"
    if master.get("piece") == rank:
        return []
    if "piece" in master:
        return [
            (
                f"the master of {master['param']} holds its piece {master['piece']}: a "
                f"piece of the wrong rank (rank {rank} owns piece {rank})"
            )
        ]
    if master.get("whole"):
        return [
            (
                f"the master of {master['param']} is the whole parameter: whole parameters "
                "dealt to ranks is not this layout; rank r owns piece r of every parameter"
            )
        ]
    if master.get("flat_share"):
        return [
            (
                f"{size} is this rank's contiguous share of one flat buffer of all the "
                "parameters (flat contiguous sharding, zerobook.zero's layout), not piece "
                f"{rank} of each parameter"
            )
        ]
    return [f"{size} ({master['dtype']}) is no piece of any parameter (fp32 copies)"]


def strided_words(masters: list[dict], rank: int) -> str:
    """Masters that hold every N-th element of their parameter: columns, not pieces."""
    first, r, many = masters[0], masters[0]["strided"], len(masters) > 1
    names = be.listed([m["param"] for m in masters])
    return (
        f"the master{'s' * many} of {names} hold{'s' * (not many)} elements {r}, "
        f"{r} + N, {r} + 2N, ... of its parameter (every N-th element: a strided "
        "column): rank r's piece is elements [r x padded(p)/N, (r + 1) x padded(p)/N) "
        "of the padded, flattened parameter, a contiguous chunk (of "
        f"{first['param']} on rank {rank}: elements [{rank * first['numel']:,}, "
        f"{(rank + 1) * first['numel']:,}))"
    )


def state_problems(report: dict, name: str) -> list[str]:
    """The optimizer's bytes: (4 + state) x sum of padded(p)/N, + step counters."""
    per_element, per_param = STATE[name]
    n, steps = report["world_size"], report["runs"][name]["steps"]
    pieces = sum(padded(report).values()) // n
    want = (4 + per_element) * pieces + per_param * len(report["params"])
    if not steps or "optimizer_bytes" not in steps[0]:
        return [f"{name}'s state not checked: no step() of the run finished"]
    have = steps[0]["optimizer_bytes"]
    if have == want:
        return []
    more = "more" if have > want else "less"
    return [
        (
            f"{name}'s master pieces and state hold {have:,} bytes, {abs(have - want):,} "
            f"{more} than (4 + {per_element}) x {pieces:,} + {per_param} x "
            f"{len(report['params'])} = {want:,}"
        )
    ]


def state_and_layout(report: dict, rank: int) -> list[str]:
    """ZeRO-1's part: for each optimizer, the masters' layout, then their bytes."""
    both = lambda n: layout_problems(report, n, rank) + state_problems(report, n)
    return [f"rank {rank}, {name}: {p}" for name in report["runs"] for p in both(name)]


def bucket_problems(step: dict, report: dict, name: str = "") -> list[str]:
    """Every gradient in one reduce-scatter, the expected buckets in arrival order,
    each input laid out rank-major."""
    reduced, sizes = as_reduced(step), padded(report)
    out = be.check_once(reduced, list(report["params"]))
    out += be.check_buckets(reduced, expected(step, report), sizes)
    for k, rs in enumerate(step["reduce_scatters"]):
        if rs["layout"] == "parameter by parameter":
            out.append(
                f"reduce-scatter {k}'s input holds its gradients one after another, "
                "each whole: rank r receives the r-th N-th of it, not piece r of every "
                "gradient; lay it out rank-major (every piece 0, then every piece 1, ...)"
            )
    return in_words(out)


def overlap_problems(step: dict, report: dict, name: str = "") -> list[str]:
    """Each reduce-scatter but the last in flight while backward goes on, one wait
    each, then every piece's .grad the mean of the ranks' gradients."""
    reduced = as_reduced(step)
    out = be.check_overlap(reduced, len(expected(step, report)))
    out += be.check_waits(reduced) + early_problems(step, report)
    by_kind: dict = {}
    for param, verdict in step["pieces"]["grads"].items():
        if verdict != "mean":
            by_kind.setdefault(verdict, []).append(param)
    for verdict, params in by_kind.items():
        words = PIECE_WORDS.get(verdict, verdict)
        out.append(f"after finish(), the piece of {be.listed(params)} holds {words}")
    return in_words(out)


def early_problems(step: dict, report: dict) -> list[str]:
    """Each reduce-scatter stays in flight until the launch that retires it (that of
    the one max_in_flight later, or finish()): waited on no earlier than the hook of
    that launch. One waited on before any later gradient is bucket_events' to name."""
    events, most = step["events"], report["max_in_flight"]
    starts = [at for at, e in enumerate(events) if e[0] == RS]
    grads = [at for at, e in enumerate(events) if e[0] == "grad"]
    for k, start in enumerate(starts):
        retire = starts[k + most] if k + most < len(starts) else len(events)
        due = max((g for g in grads if g < retire), default=0)
        index = events[start][1]
        waited = next((w for w, e in enumerate(events) if e == ["wait", index]), None)
        if waited is None or not any(start < g < waited for g in grads):
            continue
        if waited < due:
            by = max(g for g in grads if g < waited)
            launch = (
                f"reduce-scatter {k + most}'s, in the hook of {events[due][1]}"
                if retire < len(events)
                else "finish()"
            )
            return [
                f"reduce-scatter {k} was waited on in the hook of {events[by][1]}, "
                f"before the launch that retires it ({launch}): with up to {most} in "
                "flight, wait for the oldest only when launching one more"
            ]
    return []


def traffic_problems(step: dict, report: dict, name: str = "") -> list[str]:
    """One step: a reduce-scatter and an all-gather of sum padded(p)(N-1)/N elements
    each, no all-reduce."""
    n, traffic = report["world_size"], step["traffic"]
    want = sum(padded(report).values()) * (n - 1) / n
    out = []
    if "all_reduce" in traffic:
        sent = traffic["all_reduce"]["elements"]
        out.append(f"{sent:,.0f} elements all-reduced: reduce-scatter them instead")
    ops = ((RS, "reduce-scatters"), ("all_gather_into_tensor", "all-gathers"))
    for op, what in ops[: 1 + step.get("stepped", True)]:  # step() failed: no gathers
        sent = traffic.get(op, {}).get("elements", 0)
        if sent != want:
            out.append(
                f"the {what} sent {sent:,.0f} elements per rank; sum padded(p) x "
                f"(N-1)/N = {want:,.0f}"
            )
    return out


def timeline(step: dict, width: int = 88) -> str:
    """The step's backward and finish() in words: '6 gradients, reduce-scatter 0
    starts, ...'."""
    words = in_words([be.timeline(as_reduced(step), 10**6)])[0]
    return textwrap.fill(words, width, break_on_hyphens=False)
