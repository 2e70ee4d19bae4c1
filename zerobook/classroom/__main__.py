"""The classroom's command: release the labs, grade a class, write the book's lab pages.

    python -m zerobook.classroom release   # labs/*/NAME.ipynb -> _build/nbgrader/release/NAME/
    python -m zerobook.classroom grade     # new or changed submissions under _build/nbgrader/submitted/
    python -m zerobook.classroom grade --jobs 2 --all   # two at once, every submission again
                                           # (without --jobs: one per 2 cores, as memory allows)
    python -m zerobook.classroom release --only zero3 fsdp2   # some labs only (release or grade)
    python -m zerobook.classroom book      # student versions for the book: labs/ -> book/labs/NAME.ipynb
    python -m zerobook.classroom student-branch   # book/labs/ as branch student-labs (launch buttons)

The course directory (nbgrader's root) is `_build/nbgrader` unless --root says otherwise; the
instructor notebooks stay in `labs/`, which `labs/nbgrader_config.py` makes nbgrader's source.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from zerobook.classroom.grade import grade
from zerobook.classroom.limits import Bounds, auto_jobs
from zerobook.classroom.release import BOOK_LABS, book_labs, release
from zerobook.classroom.sandbox import available
from zerobook.classroom.student_branch import STUDENT_BRANCH, commit_student_versions
from zerobook.grading import COURSE_ROOT_ENV


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m zerobook.classroom")
    parser.add_argument("step", choices=["release", "grade", "book", "student-branch"])
    parser.add_argument("--labs", type=Path, default=Path("labs"))
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(os.environ.get(COURSE_ROOT_ENV, "_build/nbgrader")),
    )
    parser.add_argument(
        "--only", nargs="*", default=(), metavar="LAB", help="these labs only"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="submissions graded at once (default: one per 2 cores, as memory allows)",
    )
    parser.add_argument(
        "--all", action="store_true", help="regrade unchanged submissions too"
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade without bubblewrap: students' code can then read and change the course",
    )
    cli = parser.parse_args(argv)
    if cli.step == "book":
        print(
            f"student versions of {len(book_labs(cli.labs.resolve(), BOOK_LABS))} labs in {BOOK_LABS}"
        )
        return
    if cli.step == "student-branch":
        files = sorted(BOOK_LABS.glob("*.ipynb"))  # as `make book` wrote them
        commit = commit_student_versions(Path.cwd(), files)
        print(
            f"{len(files)} student versions on branch {STUDENT_BRANCH} ({commit[:12]})"
        )
        return
    cli.root.mkdir(parents=True, exist_ok=True)
    if cli.step == "release":
        release(cli.labs.resolve(), cli.root.resolve(), cli.only)
        return
    why = None if cli.no_sandbox else available()
    if why:
        sys.exit(
            f"not grading: {why}. Students' code would run with your rights, able to read the solutions "
            "and other submissions and to rewrite the gradebook. Install it, or pass --no-sandbox to "
            "grade trusted notebooks anyway."
        )
    if cli.jobs is None:
        cli.jobs, why = auto_jobs(Bounds.from_env())
        print(f"grading {cli.jobs} submission(s) at once ({why}; --jobs N to choose)")
    _, outcomes = grade(
        cli.labs.resolve(),
        cli.root.resolve(),
        cli.only,
        jobs=cli.jobs,
        everyone=cli.all,
        sandboxed=not cli.no_sandbox,
    )
    failures = [o for o in outcomes if o.failure]
    broken = [o for o in outcomes if o.grader_error]
    if broken:
        sys.exit(
            f"{len(broken)} submission(s) not graded because grading failed on the course's "
            "side (NOT GRADED: ...: grader error, above): repair what broke and run grade "
            "again, which grades them"
            + (f"; {len(failures)} more could not be graded" if failures else "")
        )
    if failures:
        sys.exit(
            f"{len(failures)} submission(s) could not be graded (listed above); everyone else was"
        )


if __name__ == "__main__":
    main()
