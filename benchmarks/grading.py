"""How long grading takes here: one student's submission of every lab (the instructor's notebooks,
full marks), graded as `make grade` grades it (sandboxed where bubblewrap works), in a course
directory of its own. Prints each lab's seconds against its reference's own launches, the wall time
of the whole `grade`, and what a class of 100 would take.

    .venv/bin/python benchmarks/grading.py [--students 1] [--jobs 1] [--save benchmarks/results/grading_cpu.md]

The first `grade` on a machine times each lab's reference once (limits.json) and is reported apart:
the timed call reuses those limits, as every later `make grade` does.
"""

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from common import emit

from zerobook.classroom import clean_run, grade as classroom, sandbox
from zerobook.classroom.release import lab_names, release

LABS = Path(__file__).resolve().parent.parent / "labs"


def submit(root: Path, students: int) -> None:
    """Every lab's instructor notebook as the submission of students s0, s1, ..."""
    for s in range(students):
        for lab in lab_names(LABS):
            folder = root / "submitted" / f"s{s}" / lab
            folder.mkdir(parents=True)
            shutil.copy(LABS / lab / f"{lab}.ipynb", folder)


def timed_grade(root: Path, jobs: int, sandboxed: bool) -> tuple[float, list]:
    """Seconds of one `grade --all` and its outcomes."""
    start = time.monotonic()
    _, outcomes = classroom.grade(
        LABS, root, jobs=jobs, everyone=True, sandboxed=sandboxed
    )
    return time.monotonic() - start, outcomes


def report(first: float, wall: float, outcomes: list, limits: dict, cli) -> str:
    """The table: each submission's seconds against its lab's reference launches."""
    rows = [
        "| submission | graded in (s) | its reference's launches (s) | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for o in sorted(outcomes, key=lambda o: (o.student, o.lab)):
        ref = limits[o.lab]["reference_s"]
        rows.append(
            f"| {o.student} / {o.lab} | {o.seconds:.0f} | {ref:.0f} | {o.seconds / ref:.2f} |"
        )
    graded = sum(o.seconds for o in outcomes)
    per_student = wall / cli.students
    steps = sorted({p for o in outcomes for p in o.phases})
    rows += [
        "",
        "Where a submission's seconds go (zerobook.classroom.grade's steps; with --jobs > 1 a",
        "step that writes the gradebook may have waited for another job's):",
        "",
        "| submission | " + " | ".join(steps) + " |",
        "| --- |" + " ---: |" * len(steps),
    ]
    for o in sorted(outcomes, key=lambda o: (o.student, o.lab)):
        cells = " | ".join(f"{o.phases.get(p, 0):.1f}" for p in steps)
        rows.append(f"| {o.student} / {o.lab} | {cells} |")
    return "\n".join(
        [
            f"# Grading time: {cli.students} student(s) x {len(limits)} labs, --jobs {cli.jobs}, "
            f"{'sandboxed' if cli.sandboxed else 'no sandbox'} ({time.strftime('%Y-%m-%d')})",
            "",
            *rows,
            "",
            f"- the submissions' own seconds: {graded:.0f} s; the whole `grade` call: {wall:.0f} s "
            f"({per_student:.0f} s a student)",
            f"- the first `grade` here, timing each reference once (limits.json) as well: {first:.0f} s",
            f"- failures: {sum(1 for o in outcomes if o.failure)}",
            f"- a class of 100 at this rate: {100 * per_student / 3600:.1f} h with --jobs {cli.jobs}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--save", help="also write the report to this file")
    cli = parser.parse_args()
    cli.sandboxed = sandbox.available() is None
    with tempfile.TemporaryDirectory(prefix="zerobook-grading-bench-") as scratch:
        root = Path(scratch)
        release(LABS, root)
        submit(root, cli.students)
        first, _ = timed_grade(root, cli.jobs, cli.sandboxed)
        wall, outcomes = timed_grade(root, cli.jobs, cli.sandboxed)
        limits = {lab: clean_run.lab_limits(LABS, root, lab) for lab in lab_names(LABS)}
        emit(report(first, wall, outcomes, limits, cli), cli.save)


if __name__ == "__main__":
    main()
