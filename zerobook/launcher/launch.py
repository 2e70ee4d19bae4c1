"""Notebook side: launch a real multi-process run with torchrun and get each rank's results back.

    result = zb.torchrun("zerobook.runs.hello", nproc=4)
    result.ranks[2]["total"]

Runs `sys.executable -m torch.distributed.run --standalone --nproc-per-node N` with
OMP_NUM_THREADS=1, starting the ranks one of two ways (zerobook.launcher.start_method): on Linux torchrun
forks them from its agent (`--start-method fork --run-path zerobook/launcher/rank_entry.py`:
zerobook.launcher.rank_entry says why), and the agent is forked from this process's zygote, which has
imported torch once (zerobook.launcher.zygote says when); elsewhere (or with ZEROBOOK_START=fresh) each
rank is a new interpreter under a watcher (zerobook.launcher.rank_fresh). Streams each rank's output
live, tagged `[rankR]`, and returns what each rank passed to `zb.report`. Any failure raises
`LaunchError` naming the rank that failed first; no process of the run outlives the call (a
crash, a timeout and Ctrl-C included: zerobook.launcher.run_processes).
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from zerobook.launcher.dist import BACKEND_ENV, REPORT_DIR_ENV, TIMEOUT_ENV
from zerobook.launcher.failures import (LaunchError, LaunchInterrupted, issue_tokens, raise_if_failed,
                               raise_if_unfinished, run_file, timeout_message)
from zerobook.launcher.lifetime import die_with_parent
from zerobook import witness
from zerobook.launcher import run_processes, start_method, zygote
from zerobook.launcher.rank_output import RankOutput

RUN_ID_ENV = run_processes.RUN_ID_ENV
WINDOWS = ("zb.torchrun starts ranks on Linux and macOS, not on Windows (no fork, no process groups, "
           "gloo's Windows build is partial): use WSL2. In PowerShell: `wsl --install -d Ubuntu`, "
           "restart, open Ubuntu, clone the course there and run `make install` (README: Where it runs)")
RANK_ENTRY = str(Path(__file__).resolve().with_name("rank_entry.py"))  # torchrun --run-path's
PRELOAD_AND_RUN_TORCHRUN = ("import runpy; from zerobook.launcher import agent; agent.preload(); runpy.run_module("
                            "'torch.distributed.run', run_name='__main__', alter_sys=True)")  # = -m, preloaded
FRESH_AGENT = ("import runpy; from zerobook.launcher import lifeline; lifeline.hold_agent(); runpy.run_module("
               "'torch.distributed.run', run_name='__main__', alter_sys=True)")  # = -m, held
MAX_PENDING_BYTES = 1 << 16  # of a line not ended yet; a longer one is passed on in pieces
LAUNCH_LOG_ENV = "ZEROBOOK_LAUNCH_LOG"  # a file: one JSON line per launch (what, ranks, seconds, CPU)
PER_RUN = {REPORT_DIR_ENV, RUN_ID_ENV, TIMEOUT_ENV, "TMPDIR", "PYTEST_CURRENT_TEST"}  # read as a run starts
# torchrun's LaunchConfig asks torch.cuda.is_available() in the agent, before it forks the ranks.
# torch's usual answer (cudaGetDeviceCount) marks the agent so that no rank forked from it can use
# CUDA ("Cannot re-initialize CUDA in forked subprocess": every GPU launch failed, H200, 2026-11-26);
# with this variable torch asks NVML instead, which leaves the agent unmarked.
FORK_SAFE_CUDA_CHECK = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}


@dataclass
class RunResult:
    """What came back from a run: `ranks[r]` is the dict rank r passed to `zb.report`."""

    ranks: list[dict]
    log: str
    seconds: float
    lines: dict[int, list[str]] = field(default_factory=dict, repr=False)
    witnessed: dict[int, list | None] = field(default_factory=dict, repr=False)  # zerobook.witness

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    def output(self, rank: int) -> str:
        """Everything rank `rank` printed, without its tag."""
        return "\n".join(self.lines.get(rank, []))


def resolve_target(target: str | os.PathLike) -> str:
    """A `.py` path (made absolute) or an importable module name; anything else fails now."""
    text = os.fspath(target)
    if text.endswith(".py"):
        path = Path(text).resolve()
        if not path.is_file():
            raise LaunchError(f"zb.torchrun: no such script {text!r} (looked for {path})")
        return str(path)
    try:
        found = importlib.util.find_spec(text) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise LaunchError(f"zb.torchrun: {text!r} is neither a .py file nor an importable module")
    return text


def torchrun_command(target: str, nproc: int, args, log_dir: str, max_restarts: int = 0,
                     start: str = start_method.FORK) -> list[str]:
    """torchrun's main in this interpreter (never a PATH binary): its agent forks the ranks
    (`fork`), or starts each as `python -u -m zerobook.launcher.rank_fresh TARGET ...` (`fresh`)."""
    restarts = [f"--max-restarts={max_restarts}"] if max_restarts else []
    common = ["--standalone", f"--nproc-per-node={nproc}", *restarts, f"--log-dir={log_dir}"]
    rest = [target, *[str(a) for a in args]]
    if start == start_method.FRESH:
        return [sys.executable, "-c", FRESH_AGENT, *common, "--module", "zerobook.launcher.rank_fresh", *rest]
    return [sys.executable, "-c", PRELOAD_AND_RUN_TORCHRUN, *common, "--tee=3",
            "--start-method=fork", "--run-path", RANK_ENTRY, *rest]


class RunTimedOut(LaunchError):
    """The whole run outlived its `timeout` (every rank was stopped, saying where it was)."""


def run_env(report_dir: str, run_id: str, debug: bool, collective_timeout, extra) -> dict:
    """The ranks' environment: one thread each, unbuffered output (a crash prints its Python stack)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1",
               **FORK_SAFE_CUDA_CHECK, **{REPORT_DIR_ENV: report_dir, RUN_ID_ENV: run_id})
    env.pop("TORCHELASTIC_RUN_ID", None)
    if debug:
        env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"  # gloo checks every collective matches
    if collective_timeout is not None:
        env[TIMEOUT_ENV] = str(collective_timeout)
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def torchrun(target, nproc: int = 4, args=(), timeout: float = 300, *, debug: bool = False,
             collective_timeout: float | None = None, backend: str | None = None,
             echo: bool = True, env: dict | None = None, max_restarts: int = 0,
             sandbox: list | None = None) -> RunResult:
    """Launch `target` on `nproc` ranks and return their reports; raise LaunchError on failure.

    timeout: seconds for the whole run. debug: TORCH_DISTRIBUTED_DEBUG=DETAIL, so mismatched
    collectives fail at once, naming the collectives. collective_timeout: seconds a collective
    may wait for its peers (default: zerobook.launcher.dist.DEFAULT_COLLECTIVE_TIMEOUT_S). backend: force
    "gloo" or "nccl". env: more environment variables for the ranks. max_restarts: let torchrun
    restart every rank this many times after a failure (elastic recovery); a run that recovers
    returns normally, one that fails on its last attempt raises as usual. sandbox: run torchrun
    and its ranks in it (grading: zerobook.classroom.sandbox.RankSandbox, whose
    `wrap(argv, report_dir, environ)` returns the confined command and `set_limits()` bounds
    each process it starts; the launcher knows nothing more of it).
    """
    if sys.platform == "win32":
        raise LaunchError(WINDOWS)
    if nproc < 1:
        raise ValueError(f"zb.torchrun: nproc must be >= 1, got {nproc}")
    target = resolve_target(target)
    start = start_method.FORK if sandbox is not None else start_method.chosen()  # grading: Linux
    extra = dict(env or {}, **({BACKEND_ENV: backend} if backend else {}))
    with tempfile.TemporaryDirectory(prefix="zerobook-run-") as report_dir:
        run_id = uuid.uuid4().hex
        command = torchrun_command(target, nproc, args, os.path.join(report_dir, "logs"),
                                   max_restarts, start)
        began, cpu = time.monotonic(), _children_cpu()
        stream = RankOutput(echo)
        tokens = issue_tokens(report_dir, nproc, max_restarts + 1)
        watchers = issue_tokens(report_dir, nproc, max_restarts + 1, name=".wtoken")
        environment = run_env(report_dir, run_id, debug, collective_timeout, extra)
        if sandbox is not None:
            command = sandbox.wrap(command, report_dir, environment)  # its own private /tmp
        else:  # what torchrun and the ranks leave in a temporary folder goes with the run
            environment["TMPDIR"] = os.path.join(report_dir, "tmp")
            os.mkdir(environment["TMPDIR"])
        limits = sandbox.set_limits if sandbox is not None else None
        try:
            _run(command, environment, (report_dir, run_id, sandbox is not None), began + timeout,
                 stream, target, limits)
        except KeyboardInterrupt:  # _run has stopped every process: say so in one line
            raise LaunchInterrupted(f"interrupted: stopped all {nproc} ranks of {target}") from None
        finally:
            seconds = time.monotonic() - began
            _log_launch(target, nproc, args, seconds, _children_cpu() - cpu)
        if not (max_restarts and stream.returncode == 0):  # a recovered run's failures are history
            raise_if_failed(report_dir, stream, target)
        reports = raise_if_unfinished(report_dir, tokens, stream, target)
        ranks = [json.loads(reports[r] or "{}") for r in range(nproc)]
        seen = witness.witnessed(report_dir, watchers, run_file)
    return RunResult(ranks=ranks, log="\n".join(stream.log), seconds=seconds, lines=stream.ranks,
                     witnessed=seen)


def _children_cpu() -> float:
    """CPU seconds of the finished agents (torchrun, with the ranks it waited for): this process's
    children and its zygote's."""
    import resource  # POSIX only: Windows stops in torchrun() first (WINDOWS)

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + zygote.cpu_seconds()


def _log_launch(target: str, nproc: int, args, seconds: float, cpu: float) -> None:
    """With ZEROBOOK_LAUNCH_LOG set, append what this launch cost (to find where time goes)."""
    path = os.environ.get(LAUNCH_LOG_ENV)
    if path:
        try:
            with open(path, "a") as f:
                f.write(json.dumps({"target": target, "nproc": nproc, "args": [str(a) for a in args],
                                    "seconds": round(seconds, 2), "cpu": round(cpu, 2),
                                    "by": os.environ.get("PYTEST_CURRENT_TEST", "")}) + "\n")
        except OSError:  # not writable from here (a grading sandbox): the log is a measuring aid only
            pass


def _run(command, env, run, deadline, stream, target, limits=None) -> None:
    """Start torchrun, stream its output until it exits; always leave no process behind.
    run: (its folder, its id, sandboxed?), to find its processes (zerobook.launcher.run_processes).
    limits: called in the child before it runs (a sandbox's per-process limits)."""
    proc = _start(command, env, limits)
    try:
        _pump(proc, deadline, stream)
    except _TimedOut:
        run_processes.ask_where(*run)  # each rank prints its stacks: read them for 1.5 s
        try:
            _pump(proc, time.monotonic() + 1.5, stream)
        except _TimedOut:
            pass
        raise RunTimedOut(timeout_message(target, stream), log="\n".join(stream.log)) from None
    finally:
        run_processes.stop(proc, *run)
        proc.stdout.close()
    stream.returncode = proc.returncode


def _start(command, env, limits):
    """torchrun's agent: forked from this process's zygote (torch already imported) where the
    command is torchrun's own and runs outside any sandbox, else started as the command. On the
    fresh path nothing is forked in between (no preexec_fn: the agent holds on itself)."""
    if limits is None and command[:3] == [sys.executable, "-c", PRELOAD_AND_RUN_TORCHRUN]:
        agent = zygote.start(command, env, PER_RUN)
        if agent is not None:
            return agent
    fresh = command[:3] == [sys.executable, "-c", FRESH_AGENT]
    preexec = None if fresh else functools.partial(_agent_preexec, os.getpid(), limits)
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=preexec)


def _agent_preexec(parent: int, limits) -> None:
    """In torchrun's agent before it starts (between fork and exec: nothing is imported here):
    SIGTERM when the notebook's process dies, even by SIGKILL (zerobook.launcher.lifetime; the agent then
    stops its ranks), and the sandbox's limits if given."""
    die_with_parent(signal.SIGTERM, parent)
    if limits is not None:
        limits()


class _TimedOut(Exception):
    pass


def _pump(proc: subprocess.Popen, deadline: float, stream: "RankOutput") -> None:
    """Read torchrun's combined output line by line until EOF, or raise _TimedOut."""
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
            raise _TimedOut
    if pending:
        stream.add(pending.decode(errors="replace"))
    proc.wait()
