"""No process outlives the one that started it, even when that one is killed with SIGKILL.

A notebook kernel killed outright (SIGKILL: the out-of-memory killer, `kill -9`, a crashed
JupyterLab) runs no cleanup, and torchrun's agent and its ranks sit in sessions of their own:
without this they would run on. Linux's parent-death signal (prctl PR_SET_PDEATHSIG) makes the
kernel deliver a signal to a child when its parent dies: the agent gets SIGTERM (torchrun then
stops its ranks), each rank SIGKILL when the agent is gone. Elsewhere it is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

PR_SET_PDEATHSIG = 1


def _load_prctl():
    """libc's prctl, looked up once in the parent (a child between fork and exec must not load a library)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(
            ctypes.util.find_library("c") or "libc.so.6", use_errno=True
        ).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def die_with_parent(signal_number: int, parent: int | None = None) -> bool:
    """Ask for `signal_number` when this process's parent dies; if the parent (pid `parent`, when
    given) is already gone, send it to this process now. False where the platform cannot."""
    if _PRCTL is None or _PRCTL(PR_SET_PDEATHSIG, signal_number, 0, 0, 0) != 0:
        return False
    if (
        parent is not None and os.getppid() != parent
    ):  # it died before the request was made
        os.kill(os.getpid(), signal_number)
    return True


PR_SET_NAME = 15
RANK_NAME = b"zerobook-rank"  # a rank's name in `ps` and psutil's name(): how a launcher finds it


def name_rank() -> bool:
    """Name this process `zerobook-rank` (prctl PR_SET_NAME): torchrun forks the ranks from its
    agent, so their command lines are the agent's and only the name tells them apart."""
    return _PRCTL is not None and _PRCTL(PR_SET_NAME, RANK_NAME, 0, 0, 0) == 0
