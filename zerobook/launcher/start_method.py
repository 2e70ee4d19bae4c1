"""How `zb.torchrun` starts ranks: forked from a preloaded agent, or each as a fresh process.

    fork   (Linux): torchrun's agent, forked from a zygote that has imported torch, forks each
           rank (`--start-method fork --run-path`): a rank starts in milliseconds.
    fresh  (macOS, and wherever it is asked for): torchrun's agent is a new process, and each rank
           a new interpreter (torchrun's `--module`): it imports torch itself (~2 CPU-s a rank),
           and nothing is forked after a thread started (unsafe on macOS: CPython bpo-33725).

Both give the same promises (zerobook.launcher.launch): rank-tagged output as it happens, a LaunchError
naming the rank that failed first with its last lines, the stacks of a stuck run, and no process
left behind after a timeout, an interrupt or a killed notebook. They keep them differently:

    tagged output   fork: torchrun's `--tee` (which macOS skips for forked ranks)
                    fresh: each rank's watcher tags its rank's lines (zerobook.launcher.rank_fresh)
    no survivors    fork: Linux's parent-death signals (zerobook.launcher.lifetime)
                    fresh: each agent, watcher and rank polls its parent (zerobook.launcher.lifeline)

A run's processes are found by the PID files each one leaves in the run's folder on both paths
(zerobook.launcher.run_processes). ZEROBOOK_START=fresh (or fork) chooses; a grading sandbox (Linux)
always forks.
"""

from __future__ import annotations

import os
import sys

START_ENV = "ZEROBOOK_START"
FORK, FRESH = "fork", "fresh"


def chosen() -> str:
    """`fork` on Linux, `fresh` elsewhere, unless ZEROBOOK_START says which."""
    asked = os.environ.get(START_ENV, "").strip().lower()
    if asked in (FORK, FRESH):
        if asked == FORK and not sys.platform.startswith("linux"):
            raise ValueError(
                f"{START_ENV}=fork: ranks are forked from a preloaded agent on Linux only "
                f"(this is {sys.platform}): unset it, or set {START_ENV}=fresh"
            )
        return asked
    if asked:
        raise ValueError(f"{START_ENV}={asked!r}: use {FORK!r} (Linux) or {FRESH!r}")
    return FORK if sys.platform.startswith("linux") else FRESH


def described(method: str) -> str:
    """One line for `python -m zerobook doctor`."""
    if method == FORK:
        return "forked from a preloaded torchrun agent (fast: Linux)"
    return "each a fresh Python process (torchrun --module; every rank imports torch)"
