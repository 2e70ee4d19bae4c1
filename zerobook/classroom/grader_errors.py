"""A failure of the grading machinery is the instructor's problem, never the student's.

A submission that could not be graded, lost points or was flagged is looked at once more
(`judged`). Grading failed on the course's side, and the submission is not graded, when the
grader's own code raised while grading it (`guarded`: the student's code never runs in the
grader's process, only in its sandboxes and in the clean run's), or when the grading
environment changed while it was graded or is broken now (zerobook.classroom.grading_health:
a fresh interpreter that cannot import torch, zerobook, the lab's harness or nbgrader; a
sandbox that cannot be made).

None of these reads what the student wrote: the health check runs the course's code alone,
after every process of the submission has ended, in an environment the sandbox kept
read-only to those processes. A student's mistake therefore never becomes a grader error; a
grader error found after a student's mistake only delays that student's grade. Such a
submission is marked `NOT GRADED: STUDENT / LAB: grader error: WHAT BROKE` in the summary,
its feedback page says that grading failed on the course's side (`notice_page`), its row is
left out of grades.csv (zerobook.classroom.grades_csv) and the next `grade` grades it again.
"""

from __future__ import annotations

import traceback
from html import escape
from pathlib import Path


def guarded(step, outcome, *args):
    """step(outcome, *args), or `outcome` with a grader error if the grader's own code raised
    (its traceback printed for the instructor)."""
    try:
        return step(outcome, *args)
    except Exception as exc:  # noqa: BLE001 - the grader's code: never the student's fault
        traceback.print_exc()
        where = traceback.extract_tb(exc.__traceback__)[-1]
        outcome.grader_error = (
            f"the grader raised {type(exc).__name__}: {exc} "
            f"({Path(where.filename).name}, line {where.lineno})"
        )
        return outcome


def judged(outcome, health, before: dict, root: Path):
    """`outcome`, with a grader error in place of its failure where grading failed on the
    course's side (health: a zerobook.classroom.grading_health.Health; before: its
    fingerprint when the submission began); a submission that passed is not looked at."""
    lost = outcome.failure or outcome.flags or outcome.failed_tests
    if outcome.grader_error is None and lost:
        outcome.grader_error = health.problem(outcome.lab, before)
    if outcome.grader_error:
        outcome.failure = None
        notice_page(root, outcome.student, outcome.lab)
    return outcome


def notice_page(root: Path, student: str, lab: str) -> None:
    """The feedback page of a submission not graded because grading failed on the course's
    side: nothing about the student's work, which nobody has judged yet."""
    page = root / "feedback" / student / lab / f"{lab}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(
        f"<html><body><h1>{escape(lab)}: not graded yet</h1><p>Grading your submission "
        "failed on the course's side, not because of anything in your work. The instructor "
        "has been told and will grade it again; you do not need to do anything.</p>"
        "</body></html>\n"
    )
