"""A student's IPython kernel inside the grading sandbox, as nbgrader starts it.

    python -m zerobook.classroom.sandbox_kernel -f CONNECTION_FILE [KERNEL ARGUMENTS]
    kernelspec(folder)   # a "python3" kernelspec that starts it: put folder first on JUPYTER_PATH

The kernel works in a copy of its notebook's folder (zerobook.trust.untrusted.copy_tree), bound at the
folder's path, in the sandbox of zerobook.classroom.sandbox.command, under its limits.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from zerobook import run_cache
from zerobook.trust import untrusted
from zerobook.classroom.sandbox import command, set_limits


def kernel(connection_file: str, extra=()) -> None:
    """Replace this process with an IPython kernel in a sandbox whose only writable folders are
    a copy of the current one (the notebook's, where nbgrader started the kernel), bound at its
    path, and the folder of its ipc sockets (the kernel has no network to listen on): a folder of
    its own, named zerobook-kernel-* (zerobook.classroom makes one per nbgrader call, and removes
    it, the copy inside, after the call). nbgrader, outside the sandbox, writes the notebook's
    folder after the kernel: what the kernel left there (a link to another submission, to the
    gradebook, to nbgrader's stdout) would be followed; in the copy, nothing reaches it. The
    connection file is bound read-only by itself (jupyter_client may put it in the real /tmp,
    which must stay out). `extra`: the kernel's other arguments (nbgrader passes
    --HistoryManager.hist_file=:memory:)."""
    info = json.loads(Path(connection_file).read_text())
    sockets = os.path.dirname(os.path.abspath(info.get("ip", "")))
    if info.get("transport") != "ipc" or not os.path.basename(sockets).startswith(
        "zerobook-kernel-"
    ):
        sys.exit(
            f"zerobook.classroom.sandbox_kernel: needs ipc sockets in a zerobook-kernel-* folder of their own, got "
            f"transport {info.get('transport')!r} at {info.get('ip')!r}"
        )
    # the clean run's launches, which the kernel replays
    replays = (
        [os.environ[run_cache.CACHE_ENV]] if os.environ.get(run_cache.CACHE_ENV) else []
    )
    here = os.getcwd()
    copy = os.path.join(tempfile.mkdtemp(prefix="work-", dir=sockets), "copy")
    untrusted.copy_tree(here, copy)
    argv = command(
        [
            sys.executable,
            "-m",
            "ipykernel_launcher",
            "-f",
            os.path.abspath(connection_file),
            *extra,
        ],
        writable=[sockets],
        copies={here: copy},
        cwd=here,
        readable=[connection_file, *replays],
        env={"JUPYTER_RUNTIME_DIR": sockets},
    )
    set_limits()
    os.execvp(argv[0], argv)


def kernelspec(folder: Path) -> Path:
    """A kernelspec named python3 (what the labs' notebooks ask for) that starts `kernel` above;
    put `folder` first on JUPYTER_PATH and its kernels replace the usual one."""
    spec = Path(folder) / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    sys.executable,
                    "-m",
                    "zerobook.classroom.sandbox_kernel",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": "Python 3 (sandboxed for grading)",
                "language": "python",
                "interrupt_mode": "message",
            }
        )
    )
    return Path(folder)


if __name__ == "__main__":
    if sys.argv[1:2] != ["-f"] or len(sys.argv) < 3:
        sys.exit(
            "usage: python -m zerobook.classroom.sandbox_kernel -f CONNECTION_FILE [KERNEL ARGUMENTS]"
        )
    kernel(sys.argv[2], sys.argv[3:])
