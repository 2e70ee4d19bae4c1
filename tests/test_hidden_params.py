"""An instructor's hidden parameters (labs/LAB/hidden_params.json in a private copy of labs/):
the harness takes them from the environment the classroom sets, and the lab's tests, which
read what the run reports, still grade the reference in full."""

import json

import pytest

import zerobook as zb
from conftest import ROOT
from zerobook.labs.harness import PARAMS_ENV, lab_params


def test_hidden_values_replace_the_defaults_and_a_wrong_key_or_type_says_which(
    monkeypatch,
):
    monkeypatch.setenv(PARAMS_ENV, json.dumps({"seed": 7}))
    assert lab_params(seed=1, steps=3) == {"seed": 7, "steps": 3}
    monkeypatch.setenv(PARAMS_ENV, json.dumps({"sed": 7}))
    with pytest.raises(
        ValueError, match=r"\['sed'\]: this lab's harness takes \['seed', 'steps'\]"
    ):
        lab_params(seed=1, steps=3)
    monkeypatch.setenv(PARAMS_ENV, json.dumps({"seed": "7"}))
    with pytest.raises(TypeError, match="seed='7': a int like 1"):
        lab_params(seed=1, steps=3)


@pytest.mark.launch
def test_lab2_graded_with_another_cap_and_seed_reports_them_and_scores(
    tmp_path, monkeypatch
):
    """The reference DDP under a cap and seed the students never saw: the run reports the
    instructor's cap, other buckets, and the lab's own checks find nothing wrong."""
    from zerobook import bucket_events

    student = tmp_path / "ddp_student.py"
    student.write_text(zb.grading.reference_script(ROOT / "labs", "ddp"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(PARAMS_ENV, json.dumps({"bucket_cap_bytes": 40960, "seed": 99}))
    run = zb.grading.run_part("ddp", str(student), "train", nproc=3)
    report = run.ranks[0]
    assert report["bucket_cap_bytes"] == 40960
    for step in report["steps"]:
        expected = bucket_events.expected(step, report)
        assert len(expected) == 4  # 5 at the public 32 KiB
        assert not bucket_events.check_buckets(step, expected, report["params"])
        assert not bucket_events.check_overlap(step, len(expected))
        assert not bucket_events.check_waits(step)
    assert all(
        r["parity"]["diff"] == 0 and r["broadcast"]["diff"] == 0 for r in run.ranks
    )
