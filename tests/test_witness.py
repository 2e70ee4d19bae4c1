"""A rank's record of collectives is witnessed as it happens by the rank's watcher
(zerobook.trust.witness): the grader refuses a reported record that differs from what was witnessed,
even one whose counts were kept consistent, and a witness's lines another process wrote."""

import json
import os

import pytest

import zerobook as zb
from conftest import ROOT
from zerobook.trust import witness

TARGET = ROOT / "tests" / "targets" / "witnessed_record.py"


@pytest.mark.launch
def test_an_honest_record_is_what_was_witnessed_and_leaves_the_report():
    run = zb.grading.as_witnessed(zb.torchrun(TARGET, nproc=2, echo=False))
    assert all(
        "record" not in report and not report["tampered"] for report in run.ranks
    )
    assert [event for event, _ in run.witnessed[0]] == [
        ["grad", "a"],
        ["grad", "b"],
        ["all_reduce", 0, False],
        ["finish"],
    ]


@pytest.mark.launch
def test_a_record_rewritten_after_the_fact_is_refused_though_its_counts_still_rise():
    run = zb.torchrun(TARGET, nproc=2, echo=False, args=["--rewrite"])
    assert not run.ranks[0]["tampered"]  # the in-process check alone is fooled
    with pytest.raises(
        zb.LaunchError, match="rank 0: tampering: the record reported differs"
    ):
        zb.grading.as_witnessed(run)


def test_lines_the_watcher_did_not_sign_count_as_no_witness(tmp_path):
    data = json.dumps([["grad", "a"], 0]) + "\n"
    witness.seal(str(tmp_path), 0, data.encode(), "secret")
    read = lambda path, limit: path.read_text() if path.exists() else None
    assert witness.witnessed(str(tmp_path), {0: {"secret"}}, read) == {
        0: [[["grad", "a"], 0]]
    }
    (tmp_path / "rank0.witness").write_text(json.dumps([["grad", "b"], 0]) + "\n")
    assert witness.witnessed(str(tmp_path), {0: {"secret"}}, read) == {0: None}
    report = {"record": {"events": [["grad", "b"]], "counts": [0]}}
    assert "missing or was changed" in witness.check(report, None)


def test_the_watcher_keeps_every_line_until_its_rank_ends():
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_fd)
        os.environ[witness.WITNESS_FD_ENV] = str(write_fd)
        for i in range(2000):  # past a pipe's buffer
            witness.send(["grad", f"p{i}"], i)
        os._exit(3)
    os.close(write_fd)
    data, status = witness.collect(read_fd, child)
    assert os.waitstatus_to_exitcode(status) == 3
    assert len(witness.parsed(data.decode())) == 2000
