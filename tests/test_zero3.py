"""ZeRO-3's schedule: prefetching changes when units are gathered, never the result; the events
recorded in a real run show the overlap, and the bytes of full parameters show the cost."""
import pytest

import zerobook as zb

LAYERS = 4


@pytest.fixture(scope="module")
def timeline():
    run = zb.torchrun("zerobook.labs.zero3_timeline", nproc=2, echo=False,
                      args=["--configs", "none,forward,pre,post", "--layers", LAYERS])
    return run.ranks[0]


def position(events, what: str, unit: str, after: int = 0) -> int:
    """Index of the first event (what, unit) at or after `after`."""
    return next(i for i, e in enumerate(events) if i >= after and e[1] == what and e[2] == unit)


def test_prefetch_changes_the_schedule_not_the_weights(timeline):
    assert {name: run["diff"] for name, run in timeline["runs"].items()} == \
        {name: 0.0 for name in timeline["runs"]}


def test_forward_prefetch_gathers_the_next_unit_before_the_current_one_is_computed(timeline):
    events = timeline["runs"]["forward"]["events"]
    for k in range(LAYERS - 1):
        assert position(events, "prefetch", f"blocks.{k + 1}") < position(events, "computed", f"blocks.{k}")
    assert not [e for e in timeline["runs"]["none"]["events"] if e[1] == "prefetch"]


def test_backward_pre_prefetch_gathers_the_previous_unit_before_the_current_backward_ends(timeline):
    events = timeline["runs"]["pre"]["events"]
    backward = position(events, "gather (backward)", "root")
    for k in range(LAYERS - 1, 0, -1):
        assert position(events, "prefetch", f"blocks.{k - 1}", backward) < \
            position(events, "reduced", f"blocks.{k}", backward)


def test_without_prefetch_one_unit_is_gathered_besides_the_root_and_with_it_two(timeline):
    unit_bytes = timeline["runs"]["none"]["unit_bytes"]
    root, block = unit_bytes["root"], max(v for k, v in unit_bytes.items() if k != "root")
    peak = {name: max(e[3] for e in run["events"]) for name, run in timeline["runs"].items()}
    assert peak["none"] == root + block
    assert peak["forward"] == peak["pre"] == root + 2 * block
    assert peak["post"] <= root + 2 * block


def test_ours_and_fsdp2_train_alike_and_send_the_same_bytes():
    run = zb.torchrun("zerobook.labs.fsdp2_side_by_side", nproc=2, echo=False, args=["--steps", "10"])
    for report in run.ranks:
        runs = report["runs"]
        for method in ("ours", "fsdp2"):
            assert runs[method]["diff"] <= 1e-5 * report["weight_scale"], (method, runs[method]["diff"])
            assert runs[method]["losses"] == pytest.approx(runs["ddp"]["losses"], rel=1e-6)
        traffic = {m: {op: (e["calls"], e["bytes"]) for op, e in runs[m]["traffic"].items()}
                   for m in ("ours", "fsdp2")}
        assert traffic["ours"] == traffic["fsdp2"]
