"""One nbgrader command, run on the course: its configuration in labs/, its root the course
directory (grading executes no notebook with it: zerobook.classroom.grade).

    nbgrader(labs, root, "generate_assignment", "ring_allreduce", "--force")

Importing nbgrader takes ~4 s of CPU, most of a command's cost (a class runs two a
submission: autograde, generate_feedback). Where there is os.fork (Linux, macOS), each
command is a fork of one process that imported nbgrader once (zerobook.classroom.
nbgrader_fork: its environment, folder and output its own); elsewhere (Windows) a fresh
`python -m nbgrader`. Both print the same and fail the same (tests/test_nbgrader_app.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from zerobook.classroom import nbgrader_fork
from zerobook.grading import COURSE_ROOT_ENV

SUBMISSION_TIMEOUT_S = 1800  # one student's lab, autograde and clean run each (cells stop themselves sooner)
QUIET = (
    "Checksum for grade cell",
    "has changed!",
)  # nbgrader's warning for every hidden test: noise


class StepFailed(RuntimeError):
    """An nbgrader command failed; the message is the end of what it printed."""


def nbgrader(
    labs: Path,
    root: Path,
    *args: str,
    timeout=SUBMISSION_TIMEOUT_S,
) -> str:
    """Run one nbgrader command in labs/ (its config) on course directory `root`; its
    output; StepFailed if it fails or takes longer than `timeout`."""
    bin_dir = os.path.dirname(sys.executable)  # nbgrader calls `alembic` from PATH
    env = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        **{COURSE_ROOT_ENV: str(root.resolve())},
    )
    run = nbgrader_fork.command if FORKED[0] else fresh
    returncode, printed = run(list(args), labs, env, timeout)
    if returncode is None:
        raise StepFailed(
            f"nbgrader {args[0]} took longer than {timeout} s: a cell that would not stop "
            "(an infinite loop that ignores interrupts?)"
        )
    output = "\n".join(
        line for line in printed.splitlines() if not any(q in line for q in QUIET)
    )
    if returncode:
        errors = [
            line for line in output.splitlines() if "[ERROR]" in line or "Error" in line
        ]
        raise StepFailed(
            "; ".join(errors[-3:])[-1_000:] or f"nbgrader {args[0]} exited {returncode}"
        )
    return output


def fresh(argv, cwd, env, timeout) -> tuple[int | None, str]:
    """`python -m nbgrader ARGV` in `cwd`: (its exit status, None past `timeout`; what it
    printed, stdout then stderr)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, done.stdout + done.stderr


# forked from a process that imported nbgrader where there is os.fork (nbgrader_fork);
# ZEROBOOK_NBGRADER_FORK=0: a fresh process a command, as on Windows
FORKED = [hasattr(os, "fork") and os.environ.get("ZEROBOOK_NBGRADER_FORK", "1") != "0"]
