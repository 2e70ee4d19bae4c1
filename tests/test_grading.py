"""The grading round trip: release the labs, submit notebooks, autograde, read the scores.

Lab 0 gets the full set (reference, untouched, a wrong answer, an infinite loop, sys.exit());
Labs 1 and 2 the reference and the untouched release (Labs 3 and 4: test_grading_zero.py; the
wrong answers of Labs 1-4: tests/test_labs.py). One `python -m zerobook.grading grade` call grades
every submission (as `make grade` does).
"""
import csv
import json

import pytest

from conftest import ROOT
from grading_helpers import part_scores, reference_and_release, round_trip

LAB = "setup_check"
SOURCE = ROOT / "labs" / LAB / f"{LAB}.ipynb"
PART_POINTS = {"test_part1": 1, "test_all_reduce": 2, "test_gather": 2}
MEMORY_LAB = "memory"
MEMORY_POINTS = {"test_accounting": 2, "test_measurement": 3}
RING_LAB = "ring_allreduce"
RING_POINTS = {"test_correct": 3, "test_bytes": 2}


def planted(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the solution no longer contains {old!r}"
    return text.replace(old, new)


def submissions(root) -> dict[str, dict[str, str]]:
    """Lab 0: the solution, the untouched release and planted faults; Labs 1 and 2: two each."""
    solution = SOURCE.read_text()
    lab0 = {
        "reference": solution,
        "untouched": (root / "release" / LAB / f"{LAB}.ipynb").read_text(),
        "wrong_total": planted(solution, "return value.item()", "return value.item() + 1"),
        "infinite_loop": planted(solution, "dist.all_reduce(value, op=dist.ReduceOp.SUM)",
                                 "while True:\\n        pass"),
        "sys_exit": planted(solution, "everyone = [None] * dist.get_world_size()",
                            "import sys; sys.exit()"),
    }
    return {LAB: lab0, **reference_and_release([MEMORY_LAB, RING_LAB])(root)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Release, submit each notebook, grade them all; return (course root, scores per part)."""
    root = tmp_path_factory.mktemp("course")
    round_trip(root, submissions, [LAB, MEMORY_LAB, RING_LAB])
    return (root, part_scores(root, LAB, PART_POINTS), part_scores(root, MEMORY_LAB, MEMORY_POINTS),
            part_scores(root, RING_LAB, RING_POINTS))


def test_release_strips_solutions_and_hidden_tests(graded):
    root, *_ = graded
    released = (root / "release" / LAB / f"{LAB}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in released and "HIDDEN TESTS" not in released
    assert "dist.all_gather_object(everyone, mine)" not in released
    code = "".join("".join(c["source"]) for c in json.loads(released)["cells"]
                   if c["cell_type"] == "code")
    assert code.count("raise NotImplementedError()") == 3
    assert not list((root / "release" / LAB).glob("*_student.py"))  # no solved file leaks


def test_reference_solution_scores_full_marks(graded):
    _, scores, *_ = graded
    assert scores["reference"] == PART_POINTS


def test_untouched_release_scores_zero_on_every_part(graded):
    _, scores, *_ = graded
    assert scores["untouched"] == {part: 0 for part in PART_POINTS}


def test_a_planted_wrong_answer_loses_exactly_its_points(graded):
    _, scores, *_ = graded
    assert scores["wrong_total"] == dict(PART_POINTS, test_all_reduce=0)


@pytest.mark.parametrize("student, broken", [("infinite_loop", "test_all_reduce"),
                                             ("sys_exit", "test_gather")])
def test_a_hang_or_exit_loses_that_part_and_grading_goes_on(graded, student, broken):
    _, scores, *_ = graded
    assert scores[student] == dict(PART_POINTS, **{broken: 0})


def test_scores_csv_and_feedback_are_written(graded):
    root, *_ = graded
    with open(root / "grades.csv") as f:
        rows = {(row["assignment"], row["student_id"]): float(row["score"]) for row in csv.DictReader(f)}
    assert rows[LAB, "reference"] == sum(PART_POINTS.values())
    assert rows[LAB, "untouched"] == 0
    assert rows[MEMORY_LAB, "reference"] == sum(MEMORY_POINTS.values())
    for submitted in (root / "submitted").glob("*/*"):
        student, lab = submitted.parent.name, submitted.name
        assert (root / "feedback" / student / lab / f"{lab}.html").is_file(), (student, lab)
    feedback = (root / "feedback" / "wrong_total" / LAB / f"{LAB}.html").read_text()
    assert "AssertionError" in feedback


def test_memory_lab_reference_scores_full_marks_and_the_release_zero(graded):
    _, _, scores, *_ = graded
    assert scores["reference"] == MEMORY_POINTS
    assert scores["untouched"] == {part: 0 for part in MEMORY_POINTS}


def test_ring_lab_reference_scores_full_marks_and_the_release_zero(graded):
    *_, scores = graded
    assert scores["reference"] == RING_POINTS
    assert scores["untouched"] == {part: 0 for part in RING_POINTS}
