"""One nbgrader command, run on the course: its configuration in labs/, its root the course
directory, its kernels (when grading) in the classroom's sandbox.

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
import tempfile
from pathlib import Path

from zerobook import run_cache
from zerobook.classroom import nbgrader_fork
from zerobook.grading import COURSE_ROOT_ENV, PART_TIMEOUT_ENV

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
    sandbox: Path | None = None,
    timeout=SUBMISSION_TIMEOUT_S,
    part_s=None,
    replays: str | None = None,
    job: dict | None = None,
) -> str:
    """Run one nbgrader command in labs/ (its config) on course directory `root`, kernels in
    `sandbox`'s kernelspec (zerobook.classroom.sandbox) if given, launches stopped after `part_s`; its
    output; StepFailed if it fails. job: the grading job's environment."""
    bin_dir = os.path.dirname(sys.executable)  # nbgrader calls `alembic` from PATH
    env = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        **{COURSE_ROOT_ENV: str(root.resolve())},
        **({PART_TIMEOUT_ENV: str(part_s)} if part_s else {}),
        **({run_cache.CACHE_ENV: replays} if replays else {}),
        **(job or {}),
    )
    extra = []
    with tempfile.TemporaryDirectory(prefix="zerobook-kernel-") as runtime:
        if (
            sandbox is not None
        ):  # ipc sockets in a folder of this call's own: the kernel has no network
            env.update(JUPYTER_PATH=str(sandbox), JUPYTER_RUNTIME_DIR=runtime)
            extra = [
                "--KernelManager.transport=ipc",
                f"--KernelManager.ip={runtime}/kernel",
            ]
        run = nbgrader_fork.command if FORKED[0] else fresh
        returncode, printed = run([*args, *extra], labs, env, timeout)
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
