"""make test's capstone: the instructor's solution on a 20-step schedule (hidden parameters,
as tests/test_capstone_lab.py's 40), read by every check but the target, which needs the full
schedule. The instructor notebook itself, at full length (600 steps: minutes on 2 cores),
runs in make test-grading's round trip (tests/test_grading_labs.py), which CI runs too."""

import json

import pytest

from test_capstone_lab import launch, planted
from zerobook.labs import capstone_checks
from zerobook.labs.harness import PARAMS_ENV

pytestmark = [pytest.mark.launch]
# half of test_capstone_lab.SHORT: a checkpoint every 5 steps, the kill at the
# second, the curves compared over 15 steps (every < kill_at < prefix <= steps)
QUICK = {"steps": 20, "prefix": 15, "every": 5, "kill_at": 10}


def test_the_reference_trains_clips_keeps_its_share_and_resumes(tmp_path, monkeypatch):
    student = planted(tmp_path, monkeypatch)
    monkeypatch.setenv(PARAMS_ENV, json.dumps(QUICK))
    trained = launch(student, "train")
    found = {
        "curves": capstone_checks.curve_problems(trained),
        "clip": capstone_checks.clip_problems(trained),
        "kept": capstone_checks.kept_problems(trained),
        "resume": capstone_checks.resume_problems(launch(student, "resume"), trained),
    }
    assert not any(found.values()), found
    assert [len(r["runs"]["zero3"]["curve"]) for r in trained] == [QUICK["steps"]] * 3
