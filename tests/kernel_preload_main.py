"""The zygote of make test's notebook kernels (tests/kernel_preload.py starts it by path, as
zerobook.launcher.zygote starts the launcher's): zerobook.launcher.zygote_main.serve with what a
chapter's kernel imports (PRELOAD) and ipykernel's main in place of torchrun's.

A notebook's first launch starts the launcher's zygote, a new interpreter that imports torch
and torch._dynamo (3.5 CPU-s). Each kernel is handed one as it starts instead, forked by make
test's factory (tests/kernel_preload_factory.py: started with the environment a kernel's launch
gives its zygote, with what that zygote loads and nothing of a kernel's), and the launcher
adopts it at the notebook's first launch (zerobook.launcher.zygote.Zygote.adopt) where the
launch's environment is the factory's, what ipykernel sets (KERNEL_SET) aside; otherwise it
starts its own, as always.

Only other projects' modules are preloaded for kernels: the course's own keep import-time state
of their process (zerobook.launcher.zygote notes its owner's pid), so each kernel imports them.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import time

import psutil

# what a chapter's kernel has loaded by its end (sys.modules of zero2, ring_allreduce,
# when_zero_pays): ipykernel's, torch's, matplotlib's, glue's; not matplotlib's inline backend,
# which hooks itself into the IPython it finds when imported (here there is none yet)
PRELOAD = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "torch",
    "torch.distributed",
    "torch.nn",
    "torch.optim",
    "numpy",
    "matplotlib.pyplot",
    "PIL.Image",
    "IPython.display",
    "myst_nb.ext.glue",
    "nbformat",
)
# what ipykernel's app sets before a notebook runs, and matplotlib reads when imported
INLINE = "module://matplotlib_inline.backend_inline"
# what ipykernel sets in each kernel's environment (its parent, terminal, pager, colours and
# matplotlib's backend), of which Python, torch and torchrun's agent read nothing as they start
KERNEL_SET = {"JPY_PARENT_PID", "TERM", "PYDEVD_USE_FRAME_EVAL", "PAGER", "GIT_PAGER"}
KERNEL_SET |= {"CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "MPLBACKEND"}
# the factory's abstract Unix socket (tests/kernel_preload_factory.py)
ADDRESS_ENV = "ZEROBOOK_TEST_ZYGOTE_FACTORY"
_factory: dict = {}
# how long a kernel waits for the factory to answer (it answers once it has imported torch and
# torch._dynamo: on CI's 2 cores, beside every other worker's first kernel, past nbval's start-up
# timeout once, 2026-12-07); past it the kernel starts without, and its first launch starts a
# zygote of its own, as a student's kernel does
FACTORY_WAIT_S = 20.0


def preload() -> None:
    _factory["address"] = os.environ.pop(ADDRESS_ENV, None)
    os.environ.setdefault("MPLBACKEND", INLINE)
    for name in PRELOAD:
        importlib.import_module(name)


def run(argv: list[str]) -> None:
    """`python -m ipykernel_launcher -f CONNECTION_FILE`, as that command runs it, handed a
    launcher's zygote first."""
    if argv[1:3] != ["-m", "ipykernel_launcher"]:
        raise SystemExit(f"kernel_preload_main runs ipykernel_launcher, not {argv}")
    _hand_a_zygote()
    sys.argv = [argv[0], *argv[3:]]
    sys.path[0] = os.getcwd()  # `-m` puts the directory it was started in first
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


class Elsewhere:
    """A zygote the factory forked, as the launcher's Zygote uses its process."""

    def __init__(self, pid: int):
        self.pid = pid

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while psutil.pid_exists(self.pid):
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout)
            time.sleep(0.02)
        return 0

    def kill(self) -> None:
        if psutil.pid_exists(self.pid):
            os.kill(self.pid, signal.SIGKILL)


def _hand_a_zygote() -> None:
    """Ask the factory for a launcher's zygote, and have the launcher adopt it at this kernel's
    first launch whose environment is the one the zygote's torch was imported with."""
    if not _factory.get("address"):
        return
    line, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as factory:
            factory.settimeout(FACTORY_WAIT_S)
            factory.connect("\0" + _factory["address"])
            socket.send_fds(factory, [b"zygote"], [theirs.fileno()])
            handed = json.loads(factory.recv(1 << 20))
    except (OSError, ValueError):  # no factory, or not yet: the launcher starts its own
        line.close()
        return
    finally:
        theirs.close()
    from zerobook.launcher import zygote

    first = zygote._zygote_for
    ready = [zygote.Zygote.adopt(line, Elsewhere(handed["pid"]))]
    imported_with = {k: v for k, v in handed["env"].items() if k not in KERNEL_SET}

    def zygote_for(key: tuple):
        env = {k: v for k, v in key if k not in KERNEL_SET}
        with zygote._LOCK:
            if ready and key not in zygote._ZYGOTES and env == imported_with:
                zygote._ZYGOTES[key] = ready.pop()
        return first(key)

    zygote._zygote_for = zygote_for


if __name__ == "__zygote__":
    from zerobook.launcher.zygote_main import serve

    serve(int(sys.argv[1]), preload, run)
