"""The grading round trip: release a lab, submit notebooks, autograde, read the scores.

The machinery is tested once, on Lab 0, with the full set of submissions (reference, untouched, a
wrong answer and an infinite loop in one notebook, a notebook that is not JSON); one
`python -m zerobook.grading grade` call grades them all (as `make grade` does). A rank that calls
sys.exit() or os._exit() fails its launch like any other failure (tests/test_launch.py). Every
lab's reference with the hidden tests runs under nbval in make test (labs/), its untouched release
on the harness there too (tests/test_labs.py); its wrong answers on the harness
(tests/test_lab_<lab>.py), this file and every other lab's full round trip
(tests/test_grading_labs.py) run in make test-grading.
"""

import csv
import json

import pytest

from conftest import ROOT
from grading_helpers import part_scores, round_trip

pytestmark = [pytest.mark.grading, pytest.mark.slow]

LAB = "setup_check"
SOURCE = ROOT / "labs" / LAB / f"{LAB}.ipynb"
PART_POINTS = {"test_part1": 1, "test_all_reduce": 2, "test_gather": 2}


def planted(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the solution no longer contains {old!r}"
    return text.replace(old, new)


def submissions(root) -> dict[str, dict[str, str]]:
    """Lab 0: the solution, the untouched release, a cut-off notebook, and one notebook with two
    planted faults and a correct last part: a wrong answer in part 1 and a hang in part 2 must each
    cost only their own part, and the part after the hang must still be graded (and score)."""
    solution = SOURCE.read_text()
    faulty = planted(
        solution,
        "return world_size * (world_size + 1) // 2",
        "return world_size * (world_size + 1) // 2 + 1",
    )
    faulty = (
        planted(  # a deadlock: every rank waits for its neighbour, which never sends
            faulty,
            "dist.all_reduce(value, op=dist.ReduceOp.SUM)",
            "dist.recv(value, src=(rank + 1) % dist.get_world_size())",
        )
    )  # (a sleeping loop needs `time`, which the lab's rules do not offer)
    lab0 = {
        "reference": solution,
        "untouched": (root / "release" / LAB / f"{LAB}.ipynb").read_text(),
        "wrong_then_hang": faulty,
        "not_json": solution[: len(solution) // 2],  # a notebook cut off mid-file
    }
    return {LAB: lab0}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Release, submit each notebook, grade them all; return (course root, scores per part)."""
    root = tmp_path_factory.mktemp("course")
    # two at once: one submission's hang (its collective's timeout) leaves the CPU to another
    done = round_trip(root, submissions, [LAB], check=False, jobs=2)
    assert done.returncode == 1 and f"NOT GRADED: not_json / {LAB}" in done.stdout, (
        done.stdout[-3000:]
    )
    assert done.stdout.count("NOT GRADED") == 1  # the broken notebook, and nobody else
    assert (
        "FLAGGED" not in done.stdout
    )  # honest work: nbgrader and the clean run agree, no test cell edited
    return root, part_scores(root, LAB, PART_POINTS)


def test_release_strips_solutions_and_hidden_tests(graded):
    root, _ = graded
    released = (root / "release" / LAB / f"{LAB}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in released and "HIDDEN TESTS" not in released
    assert "dist.all_gather_object(everyone, mine)" not in released
    code = "".join(
        "".join(c["source"])
        for c in json.loads(released)["cells"]
        if c["cell_type"] == "code"
    )
    assert code.count("raise NotImplementedError()") == 3
    assert not list(
        (root / "release" / LAB).glob("*_student.py")
    )  # no solved file leaks
    for name in (
        "AGENTS.md",
        "CLAUDE.md",
        ".github/copilot-instructions.md",
        ".cursor/rules/tutor.mdc",
    ):
        assert "tutor, do not solve" in (root / "release" / LAB / name).read_text(), (
            name
        )


def test_reference_solution_scores_full_marks(graded):
    _, scores = graded
    assert scores["reference"] == PART_POINTS


def test_autograde_executes_no_cell_the_clean_run_is_the_only_execution(graded):
    """nbgrader's autograde puts the hidden tests in and writes the gradebook, executing
    nothing (zerobook.classroom.grade): no cell of the autograded notebook ran, and the
    reference's scores are the clean run's. (make test runs the instructor notebook under
    nbval.)"""
    root, scores = graded
    notebook = json.loads(
        (root / "autograded" / "reference" / LAB / f"{LAB}.ipynb").read_text()
    )
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert code and not any(c.get("execution_count") for c in code)
    assert scores["reference"] == PART_POINTS


def test_untouched_release_scores_zero_on_every_part(graded):
    _, scores = graded
    assert scores["untouched"] == {part: 0 for part in PART_POINTS}


def test_a_wrong_answer_and_a_hang_lose_exactly_their_parts_and_grading_goes_on(graded):
    root, scores = graded
    assert scores["wrong_then_hang"] == dict(
        PART_POINTS, test_part1=0, test_all_reduce=0
    )
    feedback = (root / "feedback" / "wrong_then_hang" / LAB / f"{LAB}.html").read_text()
    assert "AssertionError" in feedback and "stuck in recv" in feedback


def test_scores_csv_and_feedback_are_written(graded):
    root, _ = graded
    with open(root / "grades.csv") as f:
        rows = {
            (row["assignment"], row["student_id"]): float(row["score"])
            for row in csv.DictReader(f)
        }
    assert rows[LAB, "reference"] == sum(PART_POINTS.values())
    assert rows[LAB, "untouched"] == 0
    for submitted in (root / "submitted").glob("*/*"):
        student, lab = submitted.parent.name, submitted.name
        assert (root / "feedback" / student / lab / f"{lab}.html").is_file(), (
            student,
            lab,
        )


def test_a_broken_notebook_scores_zero_with_a_reason_and_stops_nobody_else(graded):
    root, scores = graded
    assert (
        scores["reference"] == PART_POINTS
    )  # graded although another notebook could not be
    feedback = (root / "feedback" / "not_json" / LAB / f"{LAB}.html").read_text()
    assert "could not be graded" in feedback and "scores 0" in feedback
    with open(root / "grades.csv") as f:
        rows = {
            (row["assignment"], row["student_id"]): float(row["score"])
            for row in csv.DictReader(f)
        }
    assert rows[LAB, "not_json"] == 0 and rows[LAB, "reference"] == sum(
        PART_POINTS.values()
    )


def test_a_lab_submitted_without_its_source_notebook_is_an_error(tmp_path):
    from zerobook.classroom.grade import grade

    labs, root = tmp_path / "labs", tmp_path / "course"
    (labs / "gone").mkdir(parents=True)
    (root / "submitted" / "alice" / "gone").mkdir(parents=True)
    with pytest.raises(SystemExit, match="no source notebook"):
        grade(labs, root)


def nbgrader_feedback_page(path, scores: dict[str, tuple[float, float]]) -> None:
    """A feedback page as nbgrader's generate_feedback renders it (its own template), for a
    notebook with one written answer per grade_id in `scores` (score, points)."""
    import os

    import nbformat
    import nbgrader
    from nbconvert import HTMLExporter

    cells = [
        nbformat.v4.new_markdown_cell(
            f"answer {gid}",
            metadata={
                "nbgrader": {
                    "grade": True,
                    "solution": True,
                    "grade_id": gid,
                    "score": score,
                    "points": points,
                }
            },
        )
        for gid, (score, points) in scores.items()
    ]
    formgrader = os.path.join(
        os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader"
    )
    exporter = HTMLExporter(
        template_name="feedback",
        extra_template_basedirs=[f"{formgrader}/templates"],
        extra_template_paths=[f"{formgrader}/static/node_modules/bootstrap/dist/css"],
    )
    total = [sum(v[i] for v in scores.values()) for i in (0, 1)]
    html, _ = exporter.from_notebook_node(
        nbformat.v4.new_notebook(cells=cells),
        resources={
            "nbgrader": {
                "notebook": "lab",
                "score": total[0],
                "max_score": total[1],
                "late_penalty": 0,
            }
        },
    )
    path.write_text(html)


def test_an_answer_awaiting_its_hand_grade_is_labelled_so_on_the_feedback_page(
    tmp_path,
):
    from zerobook.classroom import feedback

    page = tmp_path / "lab.html"
    nbgrader_feedback_page(page, {"written": (0.0, 2.0), "other": (0.0, 1.0)})
    assert (
        "Score: 0.0 / 2.0" in page.read_text()
        and feedback.AWAITING not in page.read_text()
    )
    feedback.label_awaiting(page, {"written": 2.0})
    html = page.read_text()
    assert (
        '<a href="#written">Written response</a> (Score: 0.0 / 2.0, awaiting manual grading)'
        in html
    )
    assert (
        '<a href="#other">Written response</a> (Score: 0.0 / 1.0)</li>' in html
    )  # graded: no label
    assert html.count("(awaiting manual grading)") == 1  # at the answer itself
    assert "(Score: 0.0 / 3.0; 2 point(s) awaiting manual grading)" in html
