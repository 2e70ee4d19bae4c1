"""The desync hang of "When a run goes wrong": c10d's log read by rank (zerobook.launcher.c10d_log),
flight-recorder dumps read across ranks and both drawn (zerobook.figures.desync), and the run
that makes the hang (zerobook.runs.desync)."""

import pickle

import matplotlib.pyplot as plt
import pytest

import zerobook as zb
from zerobook.figures import desync
from zerobook.launcher import c10d_log

FINGERPRINT = (
    "[rank{r}] [I1207 22:05:39.145157729 ProcessGroupWrapper.cpp:710] [Rank {r}] Running "
    "collective: CollectiveFingerPrint(SequenceNumber={seq}, OpType={op}, "
    "TensorShape=[{shape}], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(...))"
)
STORE = (
    "[rank{r}] [I1207 22:05:38.983691862 TCPStore.cpp:316] [c10d - debug] TCP client "
    "connected to host localhost:39399"
)


def log(calls: dict[int, list[tuple[str, str]]], joined=()) -> str:
    """Each rank in `calls` and `joined` reached the store; then each rank's calls."""
    lines = [STORE.format(r=r) for r in sorted({*calls, *joined})]
    for r, said in calls.items():
        lines += [
            FINGERPRINT.format(r=r, seq=i, op=op, shape=shape)
            for i, (op, shape) in enumerate(said)
        ]
    lines.append(
        "[rank0] RuntimeError: Detected mismatch between collectives on ranks."
    )
    return "\n".join(lines)


AGREED = [("ALLREDUCE", "64, 64"), ("ALLREDUCE", "64"), ("ALLREDUCE", "")]


def test_the_log_is_read_by_rank_with_its_store_and_its_calls_in_order():
    ranks = c10d_log.read(
        log(
            {
                0: AGREED + [("BROADCAST", "64, 64")],
                1: AGREED + [("ALLREDUCE", "64, 64")],
            },
            joined=[2],  # a rank that joined and called nothing
        )
    )
    assert list(ranks) == [0, 1, 2]
    assert ranks[0].store == "localhost:39399" and ranks[2].calls == []
    assert ranks[0].calls[-1] == c10d_log.Call(3, "BROADCAST", (64, 64))
    assert ranks[1].calls[2] == c10d_log.Call(2, "ALLREDUCE", ())


def test_the_first_difference_is_a_differing_call_or_a_list_that_ends_first():
    def first(calls):
        return c10d_log.first_difference(c10d_log.read(log(calls)))

    assert first({0: AGREED, 1: AGREED, 2: AGREED}) is None
    assert (
        first({0: AGREED + [("BROADCAST", "1")], 1: AGREED + [("ALLREDUCE", "1")]}) == 3
    )
    assert first({0: AGREED[:2], 1: AGREED, 2: AGREED}) == 2
    assert first({0: AGREED, 1: AGREED[:1] + [("ALLREDUCE", "3")] + AGREED[2:]}) == 1


def entry(seq, name, state="scheduled", sizes=((64, 64),)):
    return {
        "collective_seq_id": seq,
        "profiling_name": name,
        "input_sizes": [list(s) for s in sizes],
        "state": state,
        "is_p2p": False,
    }


def hung_dumps(parts_at=3):
    """Three ranks that agree up to `parts_at`, where rank 0 broadcasts."""
    same = [entry(s, "gloo:all_reduce") for s in range(1, parts_at)]
    return {
        "fr_rank0": {"entries": same + [entry(parts_at, "gloo:broadcast")]},
        "fr_rank1": {"entries": same + [entry(parts_at, "gloo:all_reduce")]},
        "fr_rank2": {"entries": same + [entry(parts_at, "gloo:all_reduce")]},
    }


def test_the_recorder_read_across_ranks_finds_the_first_collective_not_done_by_all():
    rows = desync.recorder_rows(hung_dumps())
    assert [row.seq for row in rows] == [1, 2, 3]
    assert [(row.same, row.done_by_all) for row in rows] == [
        (True, True),
        (True, True),
        (False, False),
    ]
    stuck = desync.first_not_done(rows)
    assert stuck.seq == 3 and stuck.entries[0].op == "broadcast"


def test_nccl_states_count_and_a_rank_that_never_recorded_a_collective_shows():
    dumps = {
        "fr_rank0": {"entries": [entry(1, "nccl:all_reduce", "completed")]},
        "fr_rank1": {"entries": [entry(1, "nccl:all_reduce", "started")]},
    }
    assert desync.first_not_done(desync.recorder_rows(dumps)).seq == 1
    dumps["fr_rank1"]["entries"][0]["state"] = "completed"
    assert desync.first_not_done(desync.recorder_rows(dumps)) is None
    dumps["fr_rank0"]["entries"].append(entry(2, "nccl:all_reduce"))
    row = desync.recorder_rows(dumps)[-1]
    assert row.entries[1] is None and not row.same


def test_both_charts_fit_a_page_and_mark_where_the_ranks_part():
    ranks = c10d_log.read(
        log(
            {
                r: AGREED + [("BROADCAST" if r == 0 else "ALLREDUCE", "64, 64")]
                for r in range(3)
            }
        )
    )
    order = desync.order_chart(ranks, per_step=3)
    grid = desync.recorder_chart(desync.recorder_rows(hung_dumps()), last=2)
    for fig in (order, grid):
        assert fig.get_size_inches()[0] <= 7
    texts = [t.get_text() for t in order.axes[0].texts]
    assert "call 4 differs" in texts and "64×64" in texts and "scalar" in texts
    grid_texts = [t.get_text() for t in grid.axes[0].texts]
    assert grid_texts.count("calls differ") == 1 and "broadcast 64×64" in grid_texts
    plt.close("all")


@pytest.mark.launch
def test_the_run_parts_at_the_first_collective_of_its_step_and_every_rank_records_it(
    tmp_path,
):
    with pytest.raises(zb.LaunchError) as failed:
        zb.torchrun(
            "zerobook.runs.desync",
            nproc=3,
            args=["--at", "1", "--dump", str(tmp_path)],
            collective_timeout=3,
            echo=False,
            env={"TORCH_FR_BUFFER_SIZE": "16"},
        )
    assert "stuck in" in str(failed.value)
    dumps = {p.name: pickle.loads(p.read_bytes()) for p in tmp_path.iterdir()}
    assert sorted(dumps) == ["fr_rank0", "fr_rank1", "fr_rank2"]
    stuck = desync.first_not_done(desync.recorder_rows(dumps))
    assert stuck.seq == 5 and not stuck.same  # four all-reduces a step, then step 1's
