"""Rank side, on every platform: each process of a run leaves its PID in the run's folder, and
ends when the process that started it is gone.

    note_pid("rank")          # <run folder>/pids/<pid>: "rank <start time>"
    hold(on_lost)             # a daemon thread: on_lost() once the parent has gone

Linux has a parent-death signal (zerobook.launcher.lifetime); macOS has none, so a process whose parent
was killed outright would run on. `hold` polls the parent instead (every POLL_S): the agent
stops its ranks (SIGTERM to itself: torchrun then stops them), a rank's watcher kills its rank,
a rank kills itself. The PID files let the launcher find a run's processes without reading other
processes' environments (zerobook.launcher.run_processes); the start time written beside each PID tells a
process from a later one that got the same PID. Standard library and psutil only.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from zerobook.launcher.dist import REPORT_DIR_ENV

POLL_S = 0.25  # how often a process looks for its parent
PIDS = "pids"  # the run folder's subfolder


def note_pid(role: str, folder: str | None = None) -> None:
    """Leave this process's PID and start time in the run's folder (none outside a run)."""
    import psutil

    folder = folder or os.environ.get(REPORT_DIR_ENV)
    if not folder:
        return
    pids = Path(folder) / PIDS
    pids.mkdir(exist_ok=True)
    created = psutil.Process().create_time()
    (pids / str(os.getpid())).write_text(f"{role} {created!r}")


def hold(on_lost, poll: float = POLL_S) -> threading.Thread:
    """Call `on_lost()` (in a daemon thread) once this process's parent has gone: its parent
    PID changes when the parent dies (the orphan is adopted by init or a subreaper)."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(poll)
        on_lost()

    thread = threading.Thread(target=watch, name="zerobook-lifeline", daemon=True)
    thread.start()
    return thread


def kill_self() -> None:
    """A rank whose watcher is gone: nothing is left to report to."""
    os.kill(os.getpid(), signal.SIGKILL)


def hold_agent() -> None:
    """In torchrun's agent on the fresh path (zerobook.launcher.launch's FRESH_AGENT): note its PID, and
    SIGTERM itself when the notebook is gone (torchrun then stops every rank it started)."""
    note_pid("agent")
    hold(lambda: os.kill(os.getpid(), signal.SIGTERM))
