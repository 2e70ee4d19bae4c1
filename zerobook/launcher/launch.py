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
crash, a timeout and Ctrl-C included: zerobook.launcher.supervisor, .run_processes). The command
itself and the ranks' environment: zerobook.launcher.command.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

from zerobook.trust import witness
from zerobook.launcher import start_method, zygote
from zerobook.launcher.command import (
    FORK_SAFE_CUDA_CHECK,
    FRESH_AGENT,
    PRELOAD_AND_RUN_TORCHRUN,
    RANK_ENTRY,
    resolve_target,
    run_env,
    torchrun_command,
)
from zerobook.launcher.dist import BACKEND_ENV
from zerobook.launcher.failures import (
    LaunchError,
    LaunchInterrupted,
    issue_tokens,
    raise_if_failed,
    raise_if_unfinished,
    run_file,
)
from zerobook.launcher.rank_output import RankOutput
from zerobook.launcher.run_processes import RUN_ID_ENV
from zerobook.launcher.supervisor import (
    MAX_PENDING_BYTES,
    PER_RUN,
    RunTimedOut,
    supervise,
)

__all__ = [  # zb.torchrun's, and what zerobook.launch (this module's old name) had
    "torchrun",
    "RunResult",
    "LaunchError",
    "RunTimedOut",
    "WINDOWS",
    "LAUNCH_LOG_ENV",
    "RUN_ID_ENV",
    "RANK_ENTRY",
    "PRELOAD_AND_RUN_TORCHRUN",
    "FRESH_AGENT",
    "FORK_SAFE_CUDA_CHECK",
    "MAX_PENDING_BYTES",
    "PER_RUN",
    "resolve_target",
    "run_env",
    "torchrun_command",
]
WINDOWS = (
    "zb.torchrun starts ranks on Linux and macOS, not on Windows (no fork, no process groups, "
    "gloo's Windows build is partial): use WSL2. In PowerShell: `wsl --install -d Ubuntu`, "
    "restart, open Ubuntu, clone the course there and run `make install` (README: Where it runs)"
)
LAUNCH_LOG_ENV = "ZEROBOOK_LAUNCH_LOG"  # a file: one JSON line per launch (what, ranks, seconds, CPU)


@dataclass
class RunResult:
    """What came back from a run: `ranks[r]` is the dict rank r passed to `zb.report`."""

    ranks: list[dict]
    log: str
    seconds: float
    lines: dict[int, list[str]] = field(default_factory=dict, repr=False)
    # what each rank's watcher saw (zerobook.trust.witness)
    witnessed: dict[int, list | None] = field(default_factory=dict, repr=False)

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    def output(self, rank: int) -> str:
        """Everything rank `rank` printed, without its tag."""
        return "\n".join(self.lines.get(rank, []))


def torchrun(
    target,
    nproc: int = 4,
    args=(),
    timeout: float = 300,
    *,
    debug: bool = False,
    collective_timeout: float | None = None,
    backend: str | None = None,
    echo: bool = True,
    env: dict | None = None,
    max_restarts: int = 0,
    sandbox: list | None = None,
) -> RunResult:
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
    # grading (a sandbox) is Linux's: fork
    start = start_method.FORK if sandbox is not None else start_method.chosen()
    extra = dict(env or {}, **({BACKEND_ENV: backend} if backend else {}))
    with tempfile.TemporaryDirectory(prefix="zerobook-run-") as report_dir:
        run_id = uuid.uuid4().hex
        command = torchrun_command(
            target, nproc, args, os.path.join(report_dir, "logs"), max_restarts, start
        )
        began, cpu = time.monotonic(), _children_cpu()
        stream = RankOutput(echo)
        tokens = issue_tokens(report_dir, nproc, max_restarts + 1)
        watchers = issue_tokens(report_dir, nproc, max_restarts + 1, name=".wtoken")
        environment = run_env(report_dir, run_id, debug, collective_timeout, extra)
        if sandbox is not None:
            # its own private /tmp
            command = sandbox.wrap(command, report_dir, environment)
        else:  # what torchrun and the ranks leave in a temporary folder goes with the run
            environment["TMPDIR"] = os.path.join(report_dir, "tmp")
            os.mkdir(environment["TMPDIR"])
        limits = sandbox.set_limits if sandbox is not None else None
        try:
            supervise(
                command,
                environment,
                (report_dir, run_id, sandbox is not None),
                began + timeout,
                stream,
                target,
                limits,
            )
        except KeyboardInterrupt:  # _run has stopped every process: say so in one line
            raise LaunchInterrupted(
                f"interrupted: stopped all {nproc} ranks of {target}"
            ) from None
        finally:
            seconds = time.monotonic() - began
            _log_launch(target, nproc, args, seconds, _children_cpu() - cpu)
        if not (
            max_restarts and stream.returncode == 0
        ):  # a recovered run's failures are history
            raise_if_failed(report_dir, stream, target)
        reports = raise_if_unfinished(report_dir, tokens, stream, target)
        ranks = [json.loads(reports[r] or "{}") for r in range(nproc)]
        seen = witness.witnessed(report_dir, watchers, run_file)
    return RunResult(
        ranks=ranks,
        log="\n".join(stream.log),
        seconds=seconds,
        lines=stream.ranks,
        witnessed=seen,
    )


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
                f.write(
                    json.dumps(
                        {
                            "target": target,
                            "nproc": nproc,
                            "args": [str(a) for a in args],
                            "seconds": round(seconds, 2),
                            "cpu": round(cpu, 2),
                            "by": os.environ.get("PYTEST_CURRENT_TEST", ""),
                        }
                    )
                    + "\n"
                )
        except OSError:  # not writable from here (a grading sandbox): the log is a measuring aid only
            pass
