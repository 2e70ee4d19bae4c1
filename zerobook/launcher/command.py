"""The command that starts a run: torchrun's main in this interpreter, and the ranks' environment.

    torchrun_command("zerobook.runs.hello", 4, [], log_dir)   # [sys.executable, "-c", ..., "--standalone", ...]
    run_env(report_dir, run_id, debug, collective_timeout, extra)   # OMP_NUM_THREADS=1, ...

torchrun is never a binary found on PATH: its main runs in this interpreter, after the agent's
preload (fork: zerobook.launcher.agent) or under its lifeline (fresh: zerobook.launcher.lifeline).
zerobook.launcher.launch runs the command; zerobook.launcher.supervisor streams it and stops it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from zerobook.launcher import start_method
from zerobook.launcher.dist import REPORT_DIR_ENV, TIMEOUT_ENV
from zerobook.launcher.failures import LaunchError
from zerobook.launcher.run_processes import RUN_ID_ENV

# what torchrun's --run-path runs in each forked rank
RANK_ENTRY = str(Path(__file__).resolve().with_name("rank_entry.py"))
# = `-m torch.distributed.run`, after what the agent does first
RUN_TORCHRUN = (
    "runpy.run_module('torch.distributed.run', run_name='__main__', alter_sys=True)"
)
# the fork path: the agent's preload (its ranks are forks of it)
PRELOAD_AND_RUN_TORCHRUN = (
    "import runpy; from zerobook.launcher import agent; agent.preload(); "
    + RUN_TORCHRUN
)
# the fresh path: the agent holding on to its parent
FRESH_AGENT = (
    "import runpy; from zerobook.launcher import lifeline; lifeline.hold_agent(); "
    + RUN_TORCHRUN
)
# torchrun's LaunchConfig asks torch.cuda.is_available() in the agent, before it forks the ranks.
# torch's usual answer (cudaGetDeviceCount) marks the agent so that no rank forked from it can use
# CUDA ("Cannot re-initialize CUDA in forked subprocess": every GPU launch failed, H200, 2026-11-26);
# with this variable torch asks NVML instead, which leaves the agent unmarked.
FORK_SAFE_CUDA_CHECK = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}


def resolve_target(target: str | os.PathLike) -> str:
    """A `.py` path (made absolute) or an importable module name; anything else fails now."""
    text = os.fspath(target)
    if text.endswith(".py"):
        path = Path(text).resolve()
        if not path.is_file():
            raise LaunchError(
                f"zb.torchrun: no such script {text!r} (looked for {path})"
            )
        return str(path)
    try:
        found = importlib.util.find_spec(text) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise LaunchError(
            f"zb.torchrun: {text!r} is neither a .py file nor an importable module"
        )
    return text


def torchrun_command(
    target: str,
    nproc: int,
    args,
    log_dir: str,
    max_restarts: int = 0,
    start: str = start_method.FORK,
) -> list[str]:
    """torchrun's main in this interpreter (never a PATH binary): its agent forks the ranks
    (`fork`), or starts each as `python -u -m zerobook.launcher.rank_fresh TARGET ...` (`fresh`)."""
    restarts = [f"--max-restarts={max_restarts}"] if max_restarts else []
    common = [
        "--standalone",
        f"--nproc-per-node={nproc}",
        *restarts,
        f"--log-dir={log_dir}",
    ]
    rest = [target, *[str(a) for a in args]]
    if start == start_method.FRESH:
        return [
            sys.executable,
            "-c",
            FRESH_AGENT,
            *common,
            "--module",
            "zerobook.launcher.rank_fresh",
            *rest,
        ]
    return [
        sys.executable,
        "-c",
        PRELOAD_AND_RUN_TORCHRUN,
        *common,
        "--tee=3",
        "--start-method=fork",
        "--run-path",
        RANK_ENTRY,
        *rest,
    ]


def run_env(
    report_dir: str, run_id: str, debug: bool, collective_timeout, extra
) -> dict:
    """The ranks' environment: one thread each, unbuffered output (a crash prints its Python
    stack; each rank then writes whole lines: zerobook.launcher.rank_entry.whole_lines)."""
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        PYTHONFAULTHANDLER="1",
        **FORK_SAFE_CUDA_CHECK,
        **{REPORT_DIR_ENV: report_dir, RUN_ID_ENV: run_id},
    )
    env.pop("TORCHELASTIC_RUN_ID", None)
    if debug:
        env["TORCH_DISTRIBUTED_DEBUG"] = (
            "DETAIL"  # gloo checks every collective matches
        )
    if collective_timeout is not None:
        env[TIMEOUT_ENV] = str(collective_timeout)
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env
