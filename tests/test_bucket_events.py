"""Reading a data-parallel step from its events (zerobook.labs.bucket_events): each check finds the
mistake it is for, names it, and finds nothing in a right step. Pure Python: no ranks."""

from zerobook.labs import bucket_events as be

NUMELS = {"a": 4, "b": 4, "c": 8, "d": 2, "e": 6}
ORDER = ["c", "a", "b", "e", "d"]  # the order backward produced them in
CAP = 4 * 8  # bytes: full at 8 fp32 elements


def step(*events, all_reduces=None, grads=None) -> dict:
    """A step from short events: "c" a gradient, "R0" all-reduce 0 started (async), "B0"
    started blocking, "W0" waited, "F" / "f" finish() begins / returns."""
    kinds = {
        "R": lambda i: ["all_reduce", i, True],
        "B": lambda i: ["all_reduce", i, False],
        "W": lambda i: ["wait", i],
    }
    out = [
        ["finish"]
        if e == "F"
        else ["finished"]
        if e == "f"
        else kinds[e[0]](int(e[1:]))
        if e[0] in kinds and e[1:].lstrip("-").isdigit()
        else ["grad", e]
        for e in events
    ]
    held = all_reduces or [["c"], ["a", "b"], ["e", "d"]]
    return {
        "events": out,
        "all_reduces": [
            {"params": p, "numel": sum(NUMELS[n] for n in p), "unmatched": None}
            for p in held
        ],
        "grads": grads or dict.fromkeys(NUMELS, "mean"),
    }


RIGHT = step("c", "R0", "a", "b", "R1", "e", "d", "R2", "F", "W0", "W1", "W2", "f")


def test_buckets_follow_arrival_and_close_at_the_cap():
    assert be.expected_buckets(ORDER, NUMELS, 4, CAP) == [["c"], ["a", "b"], ["e", "d"]]
    assert be.expected_buckets(ORDER, NUMELS, 4, 10**6) == [
        ORDER
    ]  # one bucket: what is left
    assert be.arrivals(RIGHT) == ORDER


def test_a_right_step_has_no_problem():
    expected = be.expected_buckets(ORDER, NUMELS, 4, CAP)
    assert be.check_once(RIGHT, list(NUMELS)) == []
    assert be.check_buckets(RIGHT, expected, NUMELS) == []
    assert be.check_overlap(RIGHT, len(expected)) == []
    assert be.check_waits(RIGHT) == []


def test_each_mistake_is_named():
    expected = be.expected_buckets(ORDER, NUMELS, 4, CAP)
    planned = step(
        "c",
        "a",
        "b",
        "R0",
        "e",
        "d",
        "R1",
        "F",
        "W0",
        "W1",
        "f",
        all_reduces=[["a", "b", "c"], ["d", "e"]],
    )
    first, second, count = be.check_buckets(planned, expected, NUMELS)
    assert first.startswith(
        "all-reduce 0 held 3 gradients, a ... c, 16 elements; bucket 0 is 1 gradient, c"
    )
    assert second.endswith("first comes a, the next gradient backward produced, not d")
    assert count == "2 all-reduces in the step; 3 buckets expected"
    swapped = step(
        "c",
        "R0",
        "a",
        "b",
        "R1",
        "e",
        "d",
        "R2",
        all_reduces=[["c"], ["b", "a"], ["e", "d"]],
    )
    assert "another order" in be.check_buckets(swapped, expected, NUMELS)[0]
    twice = step("c", "R0", all_reduces=[["c"], ["c", "a"]])
    assert be.check_once(twice, list(NUMELS)) == [
        "in no all-reduce: b, d, e",
        "c was all-reduced 2 times (all-reduces 0, 1)",
    ]
    at_once = step("c", "R0", "W0", "a", "b", "B1", "e", "d", "R2", "F", "W2", "f")
    assert be.check_overlap(at_once, 3) == [
        "all-reduce 0 was waited on at once, before any later gradient arrived: not in flight while backward went on",
        "all-reduce 1 was blocking (async_op=False): backward stopped for it",
    ]
    late = step("c", "a", "R0", "b", "R1", "e", "d", "R2", "F", "W0", "W1", "W2", "f")
    assert be.check_overlap(late, 3)[0].startswith(
        "all-reduce 0 started late: a arrived after its last gradient"
    )
    after = step("c", "a", "b", "e", "d", "F", "R0", "R1", "R2", "W0", "W1", "W2", "f")
    assert be.check_overlap(after, 3)[0] == (
        "0 all-reduce(s) started during backward; of 3 buckets, the first 2 "
        "must start while backward goes on"
    )


def test_waits_and_the_mean_are_named():
    never = step(
        "c",
        "R0",
        "a",
        "b",
        "R1",
        "e",
        "d",
        "R2",
        "F",
        "W-3",
        "W1",
        "W2",
        "W2",
        "f",
        grads={
            **dict.fromkeys(NUMELS, "mean"),
            "c": "own",
            "a": "sum",
            "b": "sum",
            "d": "own_mean",
        },
    )
    assert be.check_waits(never) == [
        "all-reduce 0 was waited on 0 times (its sum never arrived)",
        "all-reduce 2 was waited on 2 times, not once",
        "1 wait(s) on all-reduces of an earlier step: forget a step's handles once finish() has used them",
        "after finish(), a, b hold the sum of the ranks' gradients, not their mean (divide by the world size after wait())",
        "after finish(), c holds this rank's own gradient: read before wait() returned, or never copied back",
        "after finish(), d holds this rank's own gradient divided by the world size: the sum had not arrived "
        "(wait() before reading the bucket)",
    ]


def test_the_timeline_reads_as_words():
    assert be.timeline(RIGHT) == (
        "1 gradient, all-reduce 0 starts, 2 gradients, all-reduce 1 starts, 2 gradients,\n"
        "all-reduce 2 starts, finish() begins, wait 0, wait 1, wait 2, finish() returns"
    )
