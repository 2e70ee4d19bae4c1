"""What each rank runs under `zb.torchrun`: the target script or module, with its failure recorded.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.rank_entry TARGET [ARGS...]

TARGET is a module name (`zerobook.runs.hello`) or a path to a `.py` file. When it returns, this
rank writes its finish token (read and deleted before the target ran), so that the launcher can
tell a finished script from one that ended the process early (`os._exit`, or `sys.exit()`, which
is recorded as a failure). If it raises, this rank prints the traceback, leaves a timestamped record for the launcher (so the notebook names
the rank that failed first, not the peers that lost it), and exits at once: a rank that died
mid-collective must not hang in the process group's shutdown.
"""

from __future__ import annotations

import faulthandler
import os
import runpy
import signal
import sys
import traceback
import warnings

from zerobook.lifetime import die_with_parent
from zerobook.dist import (
    flush_streams,
    forget_failure,
    mark_finished,
    record_failure,
    take_token,
)

# torch 2.13 renamed the tensor collectives; the old names still work and warn on every rank.
RENAMED_COLLECTIVES = r".*is deprecated\. Please use `torch\.distributed\."


def run_target(target: str, args: list[str]) -> None:
    """Run TARGET as __main__ with sys.argv = [TARGET, *args], as `python TARGET args` would."""
    sys.argv = [target, *args]
    if target.endswith(".py"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)


def verify_report() -> None:
    """A lab's report file must be exactly what zb.report wrote (zerobook.report_guard)."""
    from zerobook.dist import REPORT_DIR_ENV, this_rank
    from zerobook.report_guard import verify_written

    if os.environ.get(REPORT_DIR_ENV):
        verify_written(os.environ[REPORT_DIR_ENV], this_rank())


def user_traceback(exc: BaseException) -> str:
    """The traceback of the target's own code: frames of this wrapper, runpy and torch left out."""
    frames = traceback.extract_tb(exc.__traceback__)
    kept = [f for f in frames if not _is_library(f.filename)]
    hidden = len(frames) - len(kept)
    note = (
        f"  ({hidden} frames of torch and the launcher not shown)\n" if hidden else ""
    )
    return (
        "Traceback (most recent call last):\n"
        + "".join(traceback.format_list(kept))
        + note
        + "".join(traceback.format_exception_only(type(exc), exc))
    )


def _is_library(filename: str) -> bool:
    torch_dir = (
        os.path.dirname(sys.modules["torch"].__file__)
        if "torch" in sys.modules
        else None
    )
    return (
        filename == __file__
        or "runpy" in os.path.basename(filename)
        or (torch_dir is not None and filename.startswith(torch_dir))
    )


def collective_of(exc: BaseException) -> str | None:
    """The torch.distributed call the exception came out of (e.g. "all_reduce"), if any."""
    calls = [
        f.name
        for f in traceback.extract_tb(exc.__traceback__)
        if f.filename.endswith("distributed_c10d.py")
    ]
    return calls[-1] if calls else None


def fail(
    summary: str, traceback_text: str, code: int, collective: str | None = None
) -> None:
    """Record the failure, print it, and leave without running the process group's shutdown."""
    sys.stderr.write(traceback_text)
    record_failure(summary, traceback_text, collective)
    flush_streams()
    os._exit(code)


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit("usage: python -m zerobook.rank_entry TARGET [ARGS...]")
    token = take_token()  # first: the target's code must not find it
    die_with_parent(
        signal.SIGKILL
    )  # torchrun's agent gone (killed outright): nobody is left to stop this rank
    faulthandler.register(
        signal.SIGUSR1, all_threads=True
    )  # the launcher's "where are you?" at a timeout
    warnings.filterwarnings(
        "ignore", message=RENAMED_COLLECTIVES, category=FutureWarning
    )
    forget_failure()  # after a restart (torchrun --max-restarts), the last attempt's is history
    try:
        run_target(argv[0], argv[1:])
        verify_report()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) and exc.code else 1
        fail(
            f"SystemExit: sys.exit({exc.code!r}) before the script finished",
            f"rank exited with sys.exit({exc.code!r}) before the script finished\n",
            code,
        )
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the launcher
        fail(
            f"{type(exc).__name__}: {exc}".splitlines()[0],
            user_traceback(exc),
            1,
            collective_of(exc),
        )
    mark_finished(token)


if __name__ == "__main__":
    main(sys.argv[1:])
