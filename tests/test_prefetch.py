"""ZeRO-3's schedule: prefetching changes when units are gathered, never the result; the events
recorded in a real run show the overlap, and the bytes of full parameters show the cost."""
import json

import pytest

import zerobook as zb
from zerobook.zero.timeline import events_from, peak
from zerobook.zero.timeline import index as position

pytestmark = pytest.mark.launch  # starts ranks with torchrun (make test-quick leaves it out)

LAYERS = 4


@pytest.fixture(scope="module")
def timeline(tmp_path_factory):
    configs = "none,forward,pre,post,pre_only,post_only,depth2,depth2_limit2"
    run = zb.torchrun("zerobook.runs.zero3_timeline", nproc=2, echo=False,
                      args=["--configs", configs, "--layers", LAYERS, "--trace", tmp_path_factory.mktemp("trace")])
    return run.ranks[0]


def peaks(run: dict) -> tuple[int, int]:
    """Largest bytes of full parameters allocated in forward, and in backward, less the root's."""
    events, root = events_from(run["events"]), run["unit_bytes"]["root"]
    backward = position(events, "gather (backward)", "root")
    return peak(events[:backward]) - root, peak(events[backward:]) - root


def test_prefetch_changes_the_schedule_not_the_weights(timeline):
    assert {name: run["diff"] for name, run in timeline["runs"].items()} == \
        {name: 0.0 for name in timeline["runs"]}


def test_forward_prefetch_gathers_the_next_unit_before_the_current_one_is_computed(timeline):
    events = timeline["runs"]["forward"]["events"]
    for k in range(LAYERS - 1):
        assert position(events, "prefetch", f"blocks.{k + 1}") < position(events, "computed", f"blocks.{k}")
    assert not [e for e in events_from(timeline["runs"]["none"]["events"]) if e.what == "prefetch"]


def test_backward_pre_prefetch_gathers_the_previous_unit_before_the_current_backward_ends(timeline):
    events = timeline["runs"]["pre"]["events"]
    backward = position(events, "gather (backward)", "root")
    for k in range(LAYERS - 1, 0, -1):
        assert position(events, "prefetch", f"blocks.{k - 1}", backward) < \
            position(events, "reduced", f"blocks.{k}", backward)


def test_without_prefetch_one_unit_is_gathered_besides_the_root_and_with_it_two(timeline):
    unit_bytes = timeline["runs"]["none"]["unit_bytes"]
    root, block = unit_bytes["root"], max(v for k, v in unit_bytes.items() if k != "root")
    top = {name: peak(run["events"]) for name, run in timeline["runs"].items()}
    assert top["none"] == root + block
    assert top["forward"] == top["pre"] == root + 2 * block
    assert top["post"] <= root + 2 * block


def test_backward_pre_holds_two_blocks_in_backward_and_post_one(timeline):
    runs, block = timeline["runs"], timeline["runs"]["none"]["unit_bytes"]["blocks.0"]
    assert peaks(runs["pre_only"]) == (block, 2 * block)
    assert peaks(runs["post_only"]) == (block, block)


def test_the_limit_skips_prefetches_and_caps_the_blocks_gathered(timeline):
    runs, block = timeline["runs"], timeline["runs"]["none"]["unit_bytes"]["blocks.0"]
    assert peaks(runs["depth2"]) == (3 * block, 3 * block)
    assert peaks(runs["depth2_limit2"]) == (2 * block, 2 * block)
    skipped = [e for e in events_from(runs["depth2_limit2"]["events"]) if e.what == "prefetch skipped"]
    assert skipped and not [e for e in events_from(runs["depth2"]["events"]) if e.what == "prefetch skipped"]


def test_the_chrome_trace_shows_our_phases_and_the_collectives(timeline):
    names = set(timeline["trace"]["names"])
    for unit in ["root"] + [f"blocks.{k}" for k in range(LAYERS)]:
        for phase in ("forward", "backward", "wait all-gather", "reduce-scatter"):
            assert f"zero3 {phase} {unit}" in names
    assert any("allgather" in n for n in names) and any("reduce_scatter" in n for n in names)
    with open(timeline["trace"]["path"]) as f:
        trace = json.load(f)
    assert sum(e.get("name") == "zero3 forward blocks.0" for e in trace["traceEvents"]) == 1


def test_ours_and_fsdp2_train_alike_and_send_the_same_bytes_on_four_ranks():
    """With every sum in rank order, ours and FSDP2 end with DDP's bits at every step (on 2 ranks
    the ZeRO-3 chapter's cells assert the same, in fp32 and in bf16; nbval runs them)."""
    world_size = 4
    run = zb.torchrun("zerobook.runs.fsdp2_side_by_side", nproc=world_size, echo=False, args=["--steps", "10"])
    for report in run.ranks:
        runs = report["runs"]
        for method in ("ours", "fsdp2"):
            assert runs[method]["diff"] == 0.0, (method, runs[method]["diff"])
            assert runs[method]["losses"] == runs["ddp"]["losses"]
        traffic = {m: {op: (e["calls"], e["bytes"]) for op, e in runs[m]["traffic"].items()}
                   for m in ("ours", "fsdp2")}
        assert traffic["ours"] == traffic["fsdp2"]
        assert runs["ours"]["kept_bytes"] == pytest.approx(runs["fsdp2"]["kept_bytes"], rel=0.01)  # 16 P/N each
