"""Reading a ZeRO-2 step in FSDP2's layout from its report (zerobook.labs.zero_events): each
check finds the mistake it is for, names it, and finds nothing in a right step. Pure
Python: no ranks."""

from zerobook.labs import zero_events as ze
from zerobook.labs import zero_held as zh

# 3 ranks: padded sizes a 6, b 3, c 9 (pieces of 2, 1, 3)
REPORT = {
    "params": {"a": 5, "b": 3, "c": 7},
    "dims": {"a": 2, "b": 1, "c": 2},
    "world_size": 3,
    "element_size": 4,
    "bucket_cap_bytes": 4 * 9,
    "max_in_flight": 2,
}
RS = "reduce_scatter_tensor"


def step(*events, held=(), layout="rank-major", traffic=None) -> dict:
    """Short events: "c" a gradient, "R0" reduce-scatter 0 (async), "W0" waited, "F" / "f"
    finish() begins / returns, "G5" an all-gather."""

    def event(e):
        if e in ("F", "f"):
            return ["finish"] if e == "F" else ["finished"]
        if e[0] in "RWG" and e[1:].lstrip("-").isdigit():
            i = int(e[1:])
            return {
                "R": [RS, i, True],
                "W": ["wait", i],
                "G": ["all_gather_into_tensor", i, False],
            }[e[0]]
        return ["grad", e]

    buckets = [["c"], ["b", "a"]]
    reduce_scatters = [
        {
            "params": b,
            "numel": sum(ze.padded(REPORT)[n] for n in b),
            "unmatched": None,
            "layout": layout,
        }
        for b in buckets
    ]
    sent = {"calls": 2, "elements": 12.0}
    return {
        "events": [event(e) for e in events],
        "reduce_scatters": reduce_scatters,
        "held": [list(h) for h in held],
        "pieces": {"grads": dict.fromkeys("abc", "mean")},
        "traffic": traffic or {RS: sent, "all_gather_into_tensor": sent},
    }


RIGHT = step(
    "c",
    "R0",
    "b",
    "a",
    "R1",
    "F",
    "W0",
    "W1",
    "f",
    "G2",
    "G3",
    "G4",
    held=[
        (0, 0, []),
        (2, 4 * 12, []),
        (3, 4 * 12 + 12, []),
        (5, 4 * 24, []),
        (9, 4 * 6, []),
    ],
)


def test_a_right_step_has_no_problem():
    assert ze.expected(RIGHT, REPORT) == [["c"], ["b", "a"]]
    for check in (
        zh.held_problems,
        ze.bucket_problems,
        ze.overlap_problems,
        ze.traffic_problems,
    ):
        assert check(RIGHT, REPORT) == [], check.__name__


def test_the_reduce_scatters_are_read_as_bucket_events_all_reduces():
    reduced = ze.as_reduced(
        step("c", "R7", "b", "a", "R9", "F", "W7", "W-1", "W9", "f", "G10")
    )
    assert [e for e in reduced["events"] if e[0] != "grad"] == [
        ["all_reduce", 0, True],
        ["all_reduce", 1, True],
        ["finish"],
        ["wait", 0],
        ["wait", -1],
        ["wait", 1],
        ["finished"],
    ]


def test_each_mistake_is_named():
    kept = step(
        *["c", "R0", "b", "a", "R1", "F", "W0", "W1", "f"],
        held=[(2, 4 * 12 + 28, ["c"])],
    )
    assert zh.held_problems(kept, REPORT) == [
        (
            "when b's gradient arrived, param.grad of c still held after the reduce-scatter of its "
            "bucket started: set it to None in the hook"
        ),
        (
            "when b's gradient arrived: 76 bytes of gradients held; the pieces' gradients (24), the "
            "reduce-scatters in flight (48) and the open bucket (0) make 72"
        ),
    ]
    after = step(
        *["c", "R0", "b", "a", "R1", "F", "W0", "W1", "f"], held=[(9, 4 * 6 + 4, [])]
    )
    assert zh.held_problems(after, REPORT)[0].startswith("after finish(): 28 bytes")
    whole = step(
        *["c", "R0", "b", "a", "R1", "F", "W0", "W1", "f"],
        layout="parameter by parameter",
    )
    assert (
        "each whole: rank r receives the r-th N-th of it"
        in ze.bucket_problems(whole, REPORT)[0]
    )
    at_once = step(*["c", "R0", "W0", "b", "a", "R1", "F", "W1", "f"])
    assert ze.overlap_problems(at_once, REPORT) == [
        (
            "reduce-scatter 0 was waited on at once, before any later gradient arrived: not in "
            "flight while backward went on"
        )
    ]
    reduced = step(
        *["c", "b", "a", "F", "f"],
        traffic={"all_reduce": {"calls": 1, "elements": 24.0}},
    )
    assert (
        ze.traffic_problems(reduced, REPORT)[0]
        == "24 elements all-reduced: reduce-scatter them instead"
    )


def test_the_masters_layout_and_bytes_are_named():
    masters = [
        {"param": "a", "piece": 1, "numel": 2, "weight_decay": 0.1},
        {"param": "b", "whole": True, "numel": 3, "weight_decay": 0.0},
        {"flat_share": True, "numel": 6, "weight_decay": 0.1},
    ]
    report = REPORT | {
        "runs": {"SGD": {"masters": masters, "steps": [{"optimizer_bytes": 48}]}}
    }
    found = ze.state_and_layout(report, 0)
    assert (
        "holds its piece 1: a piece of the wrong rank (rank 0 owns piece 0)" in found[0]
    )
    assert "the whole parameter" in found[1] and "flat contiguous sharding" in found[2]
    assert len(found) == 3  # 48 bytes = (4 + 4) x 6: the bytes are right
    right = [{"param": p, "piece": 0, "numel": 1, "weight_decay": 0.0} for p in "abc"]
    report["runs"]["SGD"]["masters"] = right
    assert ze.state_and_layout(report, 0) == []


def test_weight_decay_on_a_1d_tensor_is_named_when_the_weights_differ():
    masters = [{"param": p, "piece": 0, "weight_decay": 0.1} for p in "abc"]
    run = {
        "masters": masters,
        "parity": {"diff": 1e-4, "worst": "b", "decay_1d": {"diff": 0.0}},
    }
    found = ze.parity_problems(REPORT | {"runs": {"AdamW": run}}, "AdamW")
    assert found[0] == "AdamW: b is off most (by 1.0e-04)"
    assert found[1].startswith("weight decay on 1-D tensor(s) b: biases and LayerNorm")


ONE = REPORT | {"max_in_flight": 1}  # launching reduce-scatter 1 retires 0


def test_retiring_the_oldest_before_a_launch_keeps_the_peak_under_the_bound():
    retired = step(
        *["c", "R0", "b", "a", "W0", "R1", "F", "W1", "f"],
        held=[(2, 4 * 12, []), (3, 4 * 12 + 12, []), (9, 4 * 6, [])],
    )
    assert zh.held_problems(retired, ONE) == []
    assert ze.overlap_problems(retired, ONE) == []
    assert zh.limit(retired, ONE) == (24, 48, 36)
    lines = zh.peak(retired, ONE).split("\n")
    assert lines[0] == "peak: 60 bytes of gradients held when a's gradient arrived"
    assert lines[1].endswith("(under the cap) 36 = 108")
    assert lines[2] == "one full set of gradients, 4 x Psi = 60: the peak is 100% of it"


def test_a_bucket_kept_past_its_retirement_is_named_in_the_memory_part_only():
    kept = step(
        *["c", "R0", "b", "a", "R1", "F", "W0", "W1", "f"],
        held=[(5, 4 * 24, []), (9, 4 * 6, [])],
    )
    assert ze.overlap_problems(kept, ONE) == []
    assert zh.held_problems(kept, ONE) == [
        "reduce-scatter 0 was still in flight when reduce-scatter 1 started (when a's "
        "gradient arrived): it was retired only in finish(), so its bucket was kept "
        "past its retirement; with at most 1 in flight, launching reduce-scatter 1 "
        "first retires reduce-scatter 0 (wait on it, its mean into the pieces' .grad, "
        "its buffers freed)",
        "when backward ended: 96 bytes of gradients held; the pieces' gradients (24), "
        "the reduce-scatters in flight (48) and the open bucket (0) make 72",
    ]
    after = step(*["c", "R0", "b", "a", "R1", "W0", "F", "W1", "f"])
    assert (
        "waited on just after, in the same hook: retire first, then launch"
        in (zh.held_problems(after, ONE)[0])
    )
    over = step(*["c", "R0", "b", "a", "W0", "R1", "F", "W1", "f"], held=[(5, 200, [])])
    found = zh.held_problems(over, ONE)
    named = step(*["c", "R0", "b", "a", "W0", "R1", "F", "W1", "f"])
    named["held"] = [[6, 200, [], [0, 1]]]
    assert zh.held_problems(named, ONE)[0].endswith(
        "make 72; the input of reduce-scatter 0 is still held, past its retirement: "
        "forget a bucket's buffers when you retire it"
    )
    assert "(a retired bucket's buffers still held?)" in found[0]
    assert found[1].startswith("peak: 200 bytes of gradients held when backward ended")


def test_a_bucket_retired_before_the_launch_that_retires_it_loses_overlap():
    early = step(*["c", "R0", "b", "W0", "a", "R1", "F", "W1", "f"])
    assert zh.held_problems(early, ONE) == []
    assert ze.overlap_problems(early, ONE) == [
        "reduce-scatter 0 was waited on in the hook of b, before the launch that "
        "retires it (reduce-scatter 1's, in the hook of a): with up to 1 in flight, "
        "wait for the oldest only when launching one more"
    ]
    during = step(*["c", "R0", "b", "W0", "a", "R1", "F", "W1", "f"])
    assert (
        "before the launch that retires it (finish())"
        in (ze.overlap_problems(during, REPORT)[0])
    )
