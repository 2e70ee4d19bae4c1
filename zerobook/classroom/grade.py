"""Grading a class: every submission in its own sandbox, scored by a clean run, never stopping the rest.

    python -m zerobook.classroom grade [--only LAB ...] [--jobs N] [--all] [--no-sandbox]

For each submission (submitted/STUDENT/LAB/LAB.ipynb), new or changed since it was last graded
(--all: every one; zerobook.classroom.submissions says which): zerobook.classroom.clean_run runs
every autograded test of the course's notebook against the submission's answers, the student's
code sandboxed (zerobook.classroom.sandbox: only that submission's folder, no network but
loopback, nothing survives it) and never in the grader's process (it also times the reference,
which sets each lab's limits). nbgrader autogrades the notebook without executing it (the
hidden tests put in, the cells checked, the answers graded by hand listed) and the clean run's
scores are its scores in the gradebook (zerobook.classroom.feedback.record): the only execution
of a submission is the clean run. The feedback page is built from the clean run's results and
the notebook as submitted (zerobook.classroom.feedback.scrub). A
submission that cannot be graded (not a notebook, a cell past its limit) scores 0 with its
reason in its feedback; one that grading failed on the course's side is not graded nor blamed
on the student (zerobook.classroom.grader_errors); everyone else is graded.
grades.csv is written for everyone graded; the summary lists failures (exit 1 if any) and flags.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from zerobook.classroom import (
    feedback,
    grader_errors,
    grades_csv,
    grading_health,
    review,
    sandbox,
)
from zerobook.classroom.clean_run import clean_run, lab_limits
from zerobook.classroom.submissions import (
    STATE,
    load_state,
    submission_problem,
    submitted,
    to_grade,
)
from zerobook.classroom.limits import Bounds, job_env, mechanism
from zerobook.classroom.nbgrader_app import StepFailed, nbgrader
from zerobook.classroom.release import lab_names
from zerobook.classroom.watchdog import Watchdog
from zerobook.trust import untrusted


@dataclass
class Outcome:
    """One submission's grading: the reason it could not be graded, or the instructor's flags."""

    student: str
    lab: str
    failure: str | None = None
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0
    peak: dict = field(default_factory=dict)  # the most it used at once (limits)
    # grade_id -> points, by hand
    awaiting: dict[str, float] = field(default_factory=dict)
    failed_tests: list[str] = field(default_factory=list)  # what the clean run failed
    grader_error: str | None = None  # what broke on the course's side: not graded
    # seconds of each step of its grading (timed)
    phases: dict[str, float] = field(default_factory=dict)


@contextlib.contextmanager
def timed(outcome: Outcome, phase: str):
    """Add the seconds of the block to `outcome.phases[phase]`."""
    start = time.monotonic()
    try:
        yield
    finally:
        outcome.phases[phase] = (
            outcome.phases.get(phase, 0.0) + time.monotonic() - start
        )


class Grader:
    """Grades submissions of a course, one pipeline per submission (several at once with jobs)."""

    def __init__(
        self,
        labs: Path,
        root: Path,
        sandboxed: bool = True,
        limits: dict | None = None,
        jobs: int = 1,
    ):
        self.labs, self.root, self.limits = labs, root, limits or {}
        self.lock = threading.Lock()  # the gradebook (SQLite): one job at a time
        self.bounds, self.slots = Bounds.from_env(), queue.SimpleQueue()
        for slot in range(max(1, jobs)):  # a uid and a watchdog per concurrent job
            self.slots.put(job_env(slot, self.bounds))
        self.health = grading_health.Health(sandboxed)

    def submission(self, lab: str, student: str) -> Outcome:
        """One student's lab, timed, within its bounds (zerobook.classroom.limits: a watchdog
        stops it, and that is its failure): see grade_one."""
        start, job, before = (
            time.monotonic(),
            self.slots.get(),
            grading_health.fingerprint(),
        )
        try:
            with Watchdog(job, self.bounds) as watchdog:
                outcome = grader_errors.guarded(
                    self.grade_one, Outcome(student, lab), job, watchdog
                )
            if watchdog.reason:
                outcome = self.failed(
                    Outcome(student, lab), f"stopped: {watchdog.reason}"
                )
        finally:
            self.slots.put(job)
        outcome.seconds, outcome.peak = time.monotonic() - start, watchdog.peak
        return grader_errors.judged(outcome, self.health, before, self.root)

    def grade_one(self, outcome: Outcome, job=None, watchdog=None) -> Outcome:
        """The clean run, nbgrader's autograde (not executed) with the clean scores, feedback;
        a submission the watchdog stopped in its clean run is not autograded."""
        lab, student = outcome.lab, outcome.student
        notebook = self.root / "submitted" / student / lab / f"{lab}.ipynb"
        why = submission_problem(self.root, lab, student)
        if why:
            return self.failed(outcome, why)
        try:
            untrusted.read_json(notebook, feedback.NOTEBOOK_BYTES)
        except (OSError, ValueError) as exc:
            return self.failed(
                outcome, f"{notebook.name} is not a notebook (not valid JSON: {exc})"
            )
        with timed(outcome, "clean run"):
            clean = clean_run(self.labs, lab, notebook, self.limits.get(lab), job)
        if watchdog is not None and watchdog.reason:
            return outcome
        try:
            self.autograde(lab, student, outcome)
        except StepFailed as exc:
            return self.failed(outcome, str(exc))
        if "error" in clean:
            return self.failed(outcome, str(clean["error"]))
        outcome.failed_tests = [
            gid for gid, result in clean.items() if result.get("error")
        ]
        with self.lock, timed(outcome, "gradebook"):  # one writer at a time
            feedback.record(self.root, lab, student, clean)
            outcome.awaiting = feedback.awaiting_in(self.root, lab, student)
        try:  # what goes wrong here costs this student alone
            with timed(outcome, "review"):
                outcome.flags += feedback.tampered_tests(self.root, lab, notebook)
                outcome.flags += review.review_file(notebook, lab)  # read, never run
            autograded = self.root / "autograded" / student / lab / f"{lab}.ipynb"
            with timed(outcome, "feedback"):
                feedback.scrub(autograded, clean, submitted=notebook)
            with self.lock, timed(outcome, "feedback"):
                nbgrader(
                    self.labs,
                    self.root,
                    "generate_feedback",
                    lab,
                    "--force",
                    "--student",
                    student,
                )
        except (StepFailed, OSError, ValueError) as exc:
            return self.failed(outcome, f"its feedback could not be made: {exc}")
        page = self.root / "feedback" / student / lab / f"{lab}.html"
        feedback.label_awaiting(page, outcome.awaiting)
        return outcome

    def autograde(self, lab: str, student: str, outcome: Outcome) -> None:
        """nbgrader autograde of one submission, not executed (the clean run is its only
        execution): the hidden tests put in, its cells checked against the source, its
        grades in the gradebook. One at a time (each writes the gradebook, a SQLite file:
        one writer, never "database is locked"), while other jobs' clean runs go on."""
        with self.lock, timed(outcome, "autograde"):
            nbgrader(
                self.labs,
                self.root,
                "autograde",
                lab,
                "--force",
                "--student",
                student,
                "--Execute.enabled=False",
            )

    def failed(self, outcome: Outcome, reason: str) -> Outcome:
        outcome.failure = reason
        feedback.failure_page(self.root, outcome.student, outcome.lab, reason)
        return outcome


def grade(
    labs: Path,
    root: Path,
    only=(),
    jobs: int = 1,
    everyone: bool = False,
    sandboxed: bool = True,
) -> tuple[Path, list[Outcome]]:
    """Grade every new or changed submission (of the labs in `only`, if given), `jobs` at once;
    write grades.csv for everyone; return it and the outcomes. A lab submitted without its source
    notebook is an error: nothing is graded."""
    wanted = {
        lab: students
        for lab, students in submitted(root).items()
        if not only or lab in only
    }
    missing = sorted(set(wanted) - set(lab_names(labs)))
    if missing:
        raise SystemExit(
            f"submissions for {', '.join(missing)} but no source notebook "
            f"({', '.join(f'labs/{m}/{m}.ipynb' for m in missing)}): restore it; nothing was graded"
        )
    todo = to_grade(labs, root, wanted, everyone)
    if not sandboxed:  # every clean run unsandboxed, the reference's first (zerobook.classroom.sandbox.OFF_ENV)
        os.environ[sandbox.OFF_ENV] = "1"
    limits = {
        lab: lab_limits(labs, root, lab) for lab in sorted({job[0] for job in todo})
    }
    for lab, limit in limits.items():
        print(
            f"{lab}: the reference takes {limit['reference_s']} s here; limits: {limit['part_s']} s a launch, "
            f"{limit['cell_s']} s a test cell",
            flush=True,
        )
    print(mechanism() if sandboxed else "no bounds: --no-sandbox", flush=True)
    # imported now: the environment may break while grading
    export = grades_csv.exporter()
    grader = Grader(labs, root, sandboxed, limits, jobs)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes = list(pool.map(lambda job: grader.submission(job[0], job[1]), todo))
    state = load_state(root)
    # unchanged, a failure would fail again (--all retries); a grader error: None, graded again
    for (lab, student, d), outcome in zip(todo, outcomes):
        state.setdefault(lab, {})[student] = None if outcome.grader_error else d
    (root / STATE).write_text(json.dumps(state, indent=1))
    export(root, scores := root / "grades.csv")
    failed = [(o.student, o.lab) for o in outcomes if o.failure]
    grades_csv.zero_rows(scores, failed)
    grades_csv.left_out(
        scores, [(o.student, o.lab) for o in outcomes if o.grader_error]
    )
    grades_csv.awaiting_column(scores, root, failed)
    feedback.summarize(
        outcomes, sum(map(len, wanted.values())) - len(todo), scores, root
    )
    return scores, outcomes
