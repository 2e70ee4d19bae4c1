"""What each rank runs under `zb.torchrun`: the target script or module, with its failure recorded.

    python -m torch.distributed.run --standalone --nproc-per-node 4 --start-method fork \
        --run-path .../zerobook/launcher/rank_entry.py TARGET [ARGS...]

torchrun's `--run-path` runs this file in each rank with `runpy.run_path`, and `--start-method
fork` starts the ranks by forking its agent, which has imported torch and torch._dynamo already
(zerobook.launcher.launch): a rank starts in milliseconds instead of importing them again (~2.4 CPU-s).
`main` gives the rank the signal handlers a fresh interpreter has (not the agent's) and forks it
once more, from a watcher that waits for it: torchrun's summary of forked ranks names only the first failure it
saw, so the watcher records the signal that ended its rank, if one did. The rank runs its exit
handlers before it leaves by `os._exit` (which would skip them).
(`python -m torch.distributed.run ... -m zerobook.launcher.rank_entry TARGET` runs it the usual way too.)

In a grading sandbox's run, the rank is confined before its target runs (zerobook.trust.graded_rank:
it cannot start a process, and the other ranks cannot read its memory).

TARGET is a module name (`zerobook.runs.hello`) or a path to a `.py` file. When it returns, this
rank writes its finish token (read and deleted before the target ran), so that the launcher can
tell a finished script from one that ended the process early (`os._exit`, or `sys.exit()`, which
is recorded as a failure). If it raises, this rank prints the traceback, leaves a timestamped record for the launcher (so the notebook names
the rank that failed first, not the peers that lost it), and exits at once: a rank that died
mid-collective must not hang in the process group's shutdown.
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import runpy
import signal
import sys
import traceback
import warnings

from zerobook.trust import graded_rank, spare, witness
from zerobook.launcher import lifeline
from zerobook.launcher.lifetime import die_with_parent, name_rank
from zerobook.launcher.dist import (
    REPORT_DIR_ENV,
    env_int,
    flush_streams,
    mark_finished,
    take_token,
    this_rank,
)
from zerobook.launcher.rank_records import (
    forget_failure,
    record_failure,
    record_signal_death,
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
    """A lab's report file must be exactly what zb.report wrote (zerobook.trust.report_guard)."""
    from zerobook.launcher.dist import REPORT_DIR_ENV, this_rank
    from zerobook.trust.report_guard import verify_written

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


def student_line(exc: BaseException) -> str:
    """In a lab, the student's own line the error came from, to lead its summary
    ("ddp_student.py, line 31, in on_grad: `...`: "), or ""."""
    harness = sys.modules.get("zerobook.labs.harness")
    path = harness.loaded[0] if harness else None
    if not path:
        return ""
    from zerobook.labs.crash import said, student_frame

    where = student_frame(exc, path)
    return said({"where": where, "error": ""}) if where else ""


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


def fresh_signals() -> None:
    """The handlers a new interpreter has: a forked rank inherits the agent's, which turn
    SIGTERM into an exception (the rank would record being stopped as its own failure)."""
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
STARTED_FRESH = "--started-fresh"  # started by its watcher (zerobook.launcher.rank_fresh), not forked


def main(argv: list[str]) -> None:
    """Fork the rank from a watcher: the rank runs TARGET, the watcher waits for it."""
    if not argv:
        sys.exit("usage: python -m zerobook.launcher.rank_entry TARGET [ARGS...]")
    if argv[0] == STARTED_FRESH:  # a new interpreter: its watcher is its parent
        forget_failure()
        lifeline.hold(lifeline.kill_self)
        run_rank(argv[1:])
    fresh_signals()
    die_with_parent(signal.SIGKILL)  # torchrun's agent killed outright: nobody stops us
    forget_failure()  # after a restart (torchrun --max-restarts), the last attempt's is history
    read_fd, write_fd = (
        os.pipe()
    )  # the rank's record, witnessed (zerobook.trust.witness)
    child = os.fork()
    if child:
        os.close(write_fd)
        watch(child, read_fd)
    else:
        die_with_parent(signal.SIGKILL)  # its watcher gone
        os.close(read_fd)
        os.environ[witness.WITNESS_FD_ENV] = str(write_fd)
        run_rank(argv)


def watch(child: int, read_fd: int) -> None:
    """The rank's parent: pass torchrun's signals on, keep what the rank's record sends it
    (zerobook.trust.witness), wait, and end as the rank ended. A rank a signal ended is recorded
    first (torchrun's summary of the ranks it forked names only the first failure it saw,
    often a peer that merely lost this one); a clean end returns."""
    folder, rank = os.environ.get(REPORT_DIR_ENV), this_rank()
    attempt = env_int("TORCHELASTIC_RESTART_COUNT", 0)
    lifeline.note_pid("watcher")
    token = (
        witness.take_token(folder, rank, attempt) if folder else None
    )  # after the fork
    if graded_rank.wanted():
        graded_rank.undumpable()  # the rank cannot read the token from this process

    def pass_on(number, _frame):
        try:
            os.kill(child, number)
        except ProcessLookupError:
            pass

    for number in PASSED_ON:
        signal.signal(number, pass_on)
    data, status = witness.collect(read_fd, child)
    if folder:
        witness.seal(folder, rank, data, token)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        record_signal_death(signal.Signals(number).name)
        faulthandler.disable()
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    code = os.waitstatus_to_exitcode(status)
    if code:
        os._exit(code)


def whole_lines() -> None:
    """Each line this rank prints leaves in one write. Unbuffered (PYTHONUNBUFFERED, for a
    crash's stack), print() writes its text and its newline apart, and torchrun's --tee reads
    whatever the rank's file holds: half a line reached the notebook with a peer's after it.
    Line buffering writes each line whole, as soon as it ends."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True, write_through=False)


def run_rank(argv: list[str]) -> None:
    """Run TARGET as this rank; leave by os._exit, recording any failure first."""
    whole_lines()
    name_rank()
    lifeline.note_pid("rank")
    if graded_rank.wanted():  # Lab 6's reader, the one process a graded rank may start
        spare.keep_for(
            argv[0], this_rank()
        )  # before the token: the spare never holds it
    token = take_token()  # first: the target's code must not find it
    if (
        graded_rank.wanted()
    ):  # a grading sandbox's rank: no new process, unreadable by peers
        why = graded_rank.confine()
        if why:
            fail(
                f"RuntimeError: {why}",
                f"a graded rank could not be confined: {why}\n",
                1,
            )
    faulthandler.register(
        signal.SIGUSR1, all_threads=True
    )  # the launcher's "where are you?" at a timeout
    warnings.filterwarnings(
        "ignore", message=RENAMED_COLLECTIVES, category=FutureWarning
    )
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
            student_line(exc) + f"{type(exc).__name__}: {exc}".splitlines()[0],
            user_traceback(exc),
            1,
            collective_of(exc),
        )
    atexit._run_exitfuncs()  # zerobook.launcher.dist's teardown among them: os._exit skips them
    mark_finished(token)
    flush_streams()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
