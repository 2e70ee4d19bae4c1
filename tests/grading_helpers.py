"""The grading round trip's moving parts, shared by the test files that run one (each in its
own course directory, so that pytest-xdist can run them side by side)."""

import subprocess
import sys

from conftest import ROOT


def sandbox_or_not() -> list[str]:
    """[] where bubblewrap works; else ["--no-sandbox"] (the machinery is tested without it), or
    a failure where REQUIRE_SANDBOX=1 (CI installs it)."""
    import os

    import pytest

    from zerobook.classroom.sandbox import available

    why = available()
    if why and os.environ.get("REQUIRE_SANDBOX") == "1":
        pytest.fail(f"grading's sandbox: {why}, and REQUIRE_SANDBOX=1")
    return ["--no-sandbox"] if why else []


def run_grading(
    *args, root, check: bool = True, env=None, labs=None, timeout: int = 900
) -> subprocess.CompletedProcess:
    """`python -m zerobook.classroom ARGS --root ROOT` (what `make release` / `make grade`
    run), `env` added to its environment, `labs` the labs folder (default labs/); grade
    without the sandbox where bubblewrap does not work here (sandbox_or_not)."""
    import os

    extra = sandbox_or_not() if args and args[0] == "grade" else []
    extra += ["--labs", str(labs)] if labs else []
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "zerobook.classroom",
            *args,
            *extra,
            "--root",
            str(root),
        ],
        cwd=ROOT,
        timeout=timeout,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if check and done.returncode:
        raise AssertionError(
            f"grading {args} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done


def source(lab: str) -> str:
    """The instructor notebook of `lab`, as JSON text (it is also the reference submission)."""
    return (ROOT / "labs" / lab / f"{lab}.ipynb").read_text()


def round_trip(
    root,
    submissions,
    labs,
    check: bool = True,
    labs_dir=None,
    jobs: int = 1,
    timeout: int = 900,
) -> subprocess.CompletedProcess:
    """Release `labs` into `root`, submit `submissions(root)` ({lab: {student: notebook}}), and
    grade them all in one call, `jobs` submissions at once (check: that every submission could
    be graded), within `timeout` seconds; return that call. labs_dir: the labs folder (an
    instructor's private copy), default labs/."""
    run_grading("release", "--only", *labs, root=root, labs=labs_dir)
    for lab, notebooks in submissions(root).items():
        for student, notebook in notebooks.items():
            folder = root / "submitted" / student / lab
            folder.mkdir(parents=True)
            (folder / f"{lab}.ipynb").write_text(notebook)
    jobs_args = ("--jobs", str(jobs)) if jobs > 1 else ()
    return run_grading(
        "grade", *jobs_args, root=root, check=check, labs=labs_dir, timeout=timeout
    )


def reference_and_release(labs):
    """Submissions: each lab's instructor notebook ("reference") and its untouched release."""
    return lambda root: {
        lab: {
            "reference": source(lab),
            "untouched": (root / "release" / lab / f"{lab}.ipynb").read_text(),
        }
        for lab in labs
    }


def part_scores(root, lab, points) -> dict[str, dict[str, float]]:
    """Student -> {grade_id: score} for `lab`, read from nbgrader's gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    scores = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission_notebook(lab, lab, student.id)
            except MissingEntry:
                continue
            scores[student.id] = {
                g.name: g.score for g in submission.grades if g.name in points
            }
    return scores


def written_answers(root, lab, names) -> dict[str, dict[str, tuple]]:
    """Student -> {grade_id: (auto score, needs a manual grade)} for the hand-graded answers `names`."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return {
            student.id: {
                g.name: (g.auto_score, g.needs_manual_grade)
                for g in gradebook.find_submission_notebook(lab, lab, student.id).grades
                if g.name in names
            }
            for student in gradebook.students
        }
