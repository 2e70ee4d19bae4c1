"""One run supervised: torchrun's agent started, its output streamed until it exits, and every
process it started stopped, whatever happened (a timeout, Ctrl-C, a crash).

    supervise(command, env, (report_dir, run_id, sandboxed), deadline, stream, target)

The agent is forked from this process's zygote (torch already imported: zerobook.launcher.zygote)
where the command is torchrun's own and runs outside any sandbox; else it is started as the
command. Past the deadline each rank is asked where it is (its stacks) and RunTimedOut is raised.
"""

from __future__ import annotations

import functools
import os
import select
import signal
import subprocess
import sys
import time

from zerobook.launcher import run_processes, zygote
from zerobook.launcher.command import FRESH_AGENT, PRELOAD_AND_RUN_TORCHRUN
from zerobook.launcher.dist import REPORT_DIR_ENV, TIMEOUT_ENV
from zerobook.launcher.failures import LaunchError, timeout_message
from zerobook.launcher.lifetime import die_with_parent
from zerobook.launcher.rank_output import RankOutput

# of a line not ended yet; a longer one is passed on in pieces
MAX_PENDING_BYTES = 1 << 16
# read as a run starts (the zygote's agent gets them from the run, not from the zygote); the
# run cache's are read by the notebook's kernel, never by a rank (zerobook.run_cache)
PER_RUN = {
    REPORT_DIR_ENV,
    run_processes.RUN_ID_ENV,
    TIMEOUT_ENV,
    "TMPDIR",
    "PYTEST_CURRENT_TEST",
    "ZEROBOOK_RUN_CACHE",
    "ZEROBOOK_RUN_CACHE_WRITE",
}


class RunTimedOut(LaunchError):
    """The whole run outlived its `timeout` (every rank was stopped, saying where it was)."""


def supervise(command, env, run, deadline, stream, target, limits=None) -> None:
    """Start torchrun, stream its output until it exits; always leave no process behind.
    run: (its folder, its id, sandboxed?), to find its processes (zerobook.launcher.run_processes).
    limits: called in the child before it runs (a sandbox's per-process limits)."""
    proc = start_agent(command, env, limits)
    try:
        pump(proc, deadline, stream)
    except TimedOut:
        # each rank prints its stacks: read them for 1.5 s
        run_processes.ask_where(*run)
        try:
            pump(proc, time.monotonic() + 1.5, stream)
        except TimedOut:
            pass
        # a rank waiting in a collective is a hang, however busy the machine
        waiting = any(
            "distributed_c10d" in "".join(lines) for lines in stream.last.values()
        )
        raise RunTimedOut(
            timeout_message(target, stream) + ("" if waiting else busy_note()),
            log="\n".join(stream.log),
        ) from None
    finally:
        run_processes.stop(proc, *run)
        proc.stdout.close()
    stream.returncode = proc.returncode


def busy_note(load: float | None = None) -> str:
    """What a timed-out run adds when the machine was busier than its cores (1-minute load
    average above them): its ranks shared the cores with other work, so it may only have been
    slow (a 7 s lab run passed 60 s in CI beside three other graders). "" where there is no load
    average (Windows) or the machine was not busy; not said when a rank was waiting in a
    collective (a hang: zerobook.launcher.failures.timeout_message names it)."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # Windows has none
            return ""
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity else os.cpu_count() or 1
    if load <= cores:
        return ""
    return (
        f"\n(this machine was busy: load {load:.1f} on {cores} core(s), so the run may only have "
        "been slow: give it a longer timeout=, or run it again when the machine is quieter)"
    )


def start_agent(command, env, limits):
    """torchrun's agent: forked from this process's zygote (torch already imported) where the
    command is torchrun's own and runs outside any sandbox, else started as the command. On the
    fresh path nothing is forked in between (no preexec_fn: the agent holds on itself)."""
    torchruns_own = command[:3] == [sys.executable, "-c", PRELOAD_AND_RUN_TORCHRUN]
    if limits is None and torchruns_own:
        agent = zygote.start(command, env, PER_RUN)
        if agent is not None:
            return agent
    fresh = command[:3] == [sys.executable, "-c", FRESH_AGENT]
    preexec = None if fresh else functools.partial(agent_preexec, os.getpid(), limits)
    return subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=preexec,
    )


def agent_preexec(parent: int, limits) -> None:
    """In torchrun's agent before it starts (between fork and exec: nothing is imported here):
    SIGTERM when the notebook's process dies, even by SIGKILL (zerobook.launcher.lifetime; the
    agent then stops its ranks), and the sandbox's limits if given."""
    die_with_parent(signal.SIGTERM, parent)
    if limits is not None:
        limits()


class TimedOut(Exception):
    """The deadline passed while the run was still going (supervise says where each rank was)."""


def pump(proc: subprocess.Popen, deadline: float, stream: RankOutput) -> None:
    """Read torchrun's combined output line by line until EOF, or raise TimedOut."""
    fd, pending = proc.stdout.fileno(), b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            *complete, pending = (pending + chunk).split(b"\n")
            if len(pending) > MAX_PENDING_BYTES:  # a line without end: shown in pieces
                complete, pending = [*complete, pending], b""
            for raw in complete:
                stream.add(raw.decode(errors="replace"))
        if time.monotonic() > deadline:
            raise TimedOut
    if pending:
        stream.add(pending.decode(errors="replace"))
    proc.wait()
