"""The grading round trip: release a lab, submit notebooks, autograde, read the scores.

The machinery is tested once, on Lab 0, with the full set of submissions (reference, untouched, a
wrong answer, an infinite loop, sys.exit()); one `python -m zerobook.grading grade` call grades
them all (as `make grade` does). Every other lab: its reference with the hidden tests runs under
nbval (labs/), its untouched release and wrong answers on the harness (tests/test_labs.py), and its
full round trip in `make test-all` (tests/test_grading_labs.py).
"""
import csv
import json

import pytest

from conftest import ROOT
from grading_helpers import part_scores, round_trip

pytestmark = pytest.mark.grading

LAB = "setup_check"
SOURCE = ROOT / "labs" / LAB / f"{LAB}.ipynb"
PART_POINTS = {"test_part1": 1, "test_all_reduce": 2, "test_gather": 2}


def planted(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the solution no longer contains {old!r}"
    return text.replace(old, new)


def submissions(root) -> dict[str, dict[str, str]]:
    """Lab 0: the solution, the untouched release and planted faults: a wrong answer in one part
    and sys.exit() in the next (one notebook, so each fault must cost only its own part), and a
    hang."""
    solution = SOURCE.read_text()
    wrong = planted(solution, "return value.item()", "return value.item() + 1")
    lab0 = {
        "reference": solution,
        "untouched": (root / "release" / LAB / f"{LAB}.ipynb").read_text(),
        "wrong_then_exit": planted(wrong, "everyone = [None] * dist.get_world_size()", "import sys; sys.exit()"),
        "infinite_loop": planted(solution, "dist.all_reduce(value, op=dist.ReduceOp.SUM)",  # a hang that
                                 "while True:\\n        __import__('time').sleep(0.1)"),  # leaves the CPU to the rest
        "not_json": solution[: len(solution) // 2],  # a notebook cut off mid-file
    }
    return {LAB: lab0}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Release, submit each notebook, grade them all; return (course root, scores per part)."""
    root = tmp_path_factory.mktemp("course")
    done = round_trip(root, submissions, [LAB], check=False)
    assert done.returncode == 1 and f"NOT GRADED: not_json / {LAB}" in done.stdout, done.stdout[-3000:]
    assert done.stdout.count("NOT GRADED") == 1  # the broken notebook, and nobody else
    return root, part_scores(root, LAB, PART_POINTS)


def test_release_strips_solutions_and_hidden_tests(graded):
    root, _ = graded
    released = (root / "release" / LAB / f"{LAB}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in released and "HIDDEN TESTS" not in released
    assert "dist.all_gather_object(everyone, mine)" not in released
    code = "".join("".join(c["source"]) for c in json.loads(released)["cells"]
                   if c["cell_type"] == "code")
    assert code.count("raise NotImplementedError()") == 3
    assert not list((root / "release" / LAB).glob("*_student.py"))  # no solved file leaks


def test_reference_solution_scores_full_marks(graded):
    _, scores = graded
    assert scores["reference"] == PART_POINTS


def test_untouched_release_scores_zero_on_every_part(graded):
    _, scores = graded
    assert scores["untouched"] == {part: 0 for part in PART_POINTS}


def test_a_wrong_answer_and_an_exit_lose_exactly_their_parts(graded):
    _, scores = graded
    assert scores["wrong_then_exit"] == dict(PART_POINTS, test_all_reduce=0, test_gather=0)


def test_a_hang_loses_that_part_and_grading_goes_on(graded):
    _, scores = graded
    assert scores["infinite_loop"] == dict(PART_POINTS, test_all_reduce=0)


def test_scores_csv_and_feedback_are_written(graded):
    root, _ = graded
    with open(root / "grades.csv") as f:
        rows = {(row["assignment"], row["student_id"]): float(row["score"]) for row in csv.DictReader(f)}
    assert rows[LAB, "reference"] == sum(PART_POINTS.values())
    assert rows[LAB, "untouched"] == 0
    for submitted in (root / "submitted").glob("*/*"):
        student, lab = submitted.parent.name, submitted.name
        assert (root / "feedback" / student / lab / f"{lab}.html").is_file(), (student, lab)
    feedback = (root / "feedback" / "wrong_then_exit" / LAB / f"{LAB}.html").read_text()
    assert "AssertionError" in feedback and "sys.exit" in feedback


def test_a_broken_notebook_scores_zero_with_a_reason_and_stops_nobody_else(graded):
    root, scores = graded
    assert scores["reference"] == PART_POINTS  # graded although another notebook could not be
    feedback = (root / "feedback" / "not_json" / LAB / f"{LAB}.html").read_text()
    assert "could not be graded" in feedback and "scores 0" in feedback
    with open(root / "grades.csv") as f:
        rows = {(row["assignment"], row["student_id"]): float(row["score"]) for row in csv.DictReader(f)}
    assert rows[LAB, "not_json"] == 0 and rows[LAB, "reference"] == sum(PART_POINTS.values())


def test_a_lab_submitted_without_its_source_notebook_is_an_error(tmp_path):
    from zerobook.grading import grade

    labs, root = tmp_path / "labs", tmp_path / "course"
    (labs / "gone").mkdir(parents=True)
    (root / "submitted" / "alice" / "gone").mkdir(parents=True)
    with pytest.raises(SystemExit, match="no source notebook"):
        grade(labs, root)
