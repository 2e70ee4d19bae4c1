"""Notebook side: find a run's processes, ask its ranks where they are, stop them all.

Every agent, watcher and rank of a run leaves `pids/<pid>` in the run's folder, holding its role
and start time (zerobook.launcher.lifeline.note_pid): a process is one of the run's only if a process with
that PID is alive *and* started when the file says (a PID reused by another process is not).
This works wherever psutil does (Linux, macOS). A grading sandbox's processes live in a PID
namespace of their own (their PID files name PIDs of that namespace, and the student's code
could write the folder): a sandboxed run is found, on Linux, by the run id in each process's
environment instead.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psutil

from zerobook.launcher.lifeline import PIDS

RUN_ID_ENV = "ZEROBOOK_RUN_ID"
RANK_ROLE = "rank"
SAME_START_S = (
    0.05  # psutil's start times are rounded (to 1/100 s where the OS counts ticks)
)


def noted(report_dir: str, role: str | None = None) -> list[psutil.Process]:
    """The live processes that left their PID in the run's folder (only `role`'s, if given)."""
    found = []
    folder = Path(report_dir) / PIDS
    for path in folder.glob("*") if folder.is_dir() else []:
        try:
            kind, created = path.read_text().split()
            if role and kind != role:
                continue
            process = psutil.Process(int(path.name))
            same = abs(process.create_time() - float(created)) <= SAME_START_S
            if same and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (ValueError, OSError, psutil.Error):  # gone, or not a PID file of ours
            continue
    return found


def by_environment(run_id: str) -> list[psutil.Process]:
    """A sandboxed run's processes (Linux): those whose environment holds the run's id."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(RUN_ID_ENV) == run_id:
                found.append(process)
        except Exception:  # noqa: BLE001 - gone, a zombie, or not ours to read
            continue
    return found


def family(report_dir: str, run_id: str, sandboxed: bool) -> list[psutil.Process]:
    return by_environment(run_id) if sandboxed else noted(report_dir)


def ranks(report_dir: str, run_id: str, sandboxed: bool) -> list[psutil.Process]:
    """The run's ranks (not their watchers, not the agent)."""
    if not sandboxed:
        return noted(report_dir, RANK_ROLE)
    from zerobook.launcher.lifetime import RANK_NAME

    return [p for p in by_environment(run_id) if _name(p) == RANK_NAME.decode()]


def ask_where(report_dir: str, run_id: str, sandboxed: bool) -> None:
    """SIGUSR1 to every rank: faulthandler prints each thread's Python stack (zerobook.launcher.rank_entry
    registered it)."""
    for process in ranks(report_dir, run_id, sandboxed):
        _signal(process, signal.SIGUSR1)


def stop(
    agent, report_dir: str, run_id: str, sandboxed: bool, grace: float = 3.0
) -> None:
    """SIGTERM the agent and every process of the run, SIGKILL what is left after `grace` s, and
    reap the agent. A process still starting when this runs has not noted its PID yet: its
    parent's end stops it (zerobook.launcher.lifeline, zerobook.launcher.lifetime), so the run's processes are
    looked for again until none is found."""
    deadline = time.monotonic() + 4 * grace
    while True:
        found = family(report_dir, run_id, sandboxed)
        if agent.poll() is None:
            found.append(psutil.Process(agent.pid))
        for process in found:
            _signal(process, signal.SIGTERM)
        _, alive = psutil.wait_procs(found, timeout=grace)
        for process in alive:
            _signal(process, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=grace)
        agent.wait()
        if not found or time.monotonic() > deadline:
            return
        time.sleep(0.1)


def _name(process) -> str:
    try:
        return process.name()
    except psutil.Error:
        return ""


def _signal(process, sig) -> None:
    try:
        process.send_signal(sig)
    except Exception:  # noqa: BLE001 - it may have exited meanwhile
        pass
