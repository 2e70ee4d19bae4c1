"""pytest plugin (`-p tests.kernel_preload`, make test's first phase): nbval's notebook kernels
are forked from one process per test worker that has imported what a chapter's kernel imports.

Each notebook's kernel ran `python -m ipykernel_launcher -f CONNECTION_FILE` and imported
torch, matplotlib, ipykernel and glue's modules again: ~2.5 CPU-s a notebook, 28 notebooks a
make test. The kernel zygote (tests/kernel_preload_main.py: the launcher's zygote,
zerobook.launcher.zygote, with ipykernel's main) imports them once; each kernel is then what
that command starts: ipykernel's main, in the notebook's folder, with the environment
jupyter_client gave it, in a session of its own, its pid the one jupyter_client signals.
What differs is only what is loaded before its first cell, and its parent (the zygote; it dies
with it). Each kernel is also handed the launcher's zygote its first launch would start (3.5
CPU-s: torch and torch._dynamo imported), forked by a factory started as that zygote would be
(tests/kernel_preload_factory.py). Where the zygote cannot (not Linux, another environment than
the first kernel's, a command that is not ipykernel's, ZEROBOOK_KERNEL_PRELOAD=0), the kernel is
started as before.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import nbval.kernel
from jupyter_client.provisioning import local_provisioner

from zerobook import run_cache
from zerobook.launcher import command, supervisor, zygote

MAIN = str(Path(__file__).resolve().with_name("kernel_preload_main.py"))
FACTORY = str(Path(__file__).resolve().with_name("kernel_preload_factory.py"))
ADDRESS_ENV = "ZEROBOOK_TEST_ZYGOTE_FACTORY"  # where the kernels find the factory
# "0": each kernel is started as jupyter_client starts it
OFF_ENV = "ZEROBOOK_KERNEL_PRELOAD"
# what differs from one kernel to the next and nothing imported reads: jupyter_client's parent
# pid, pytest's test of the moment (the notebook whose first cell starts the kernel), the lab
# notebooks' run cache (tests/lab_replays.py)
PER_KERNEL = {
    "JPY_PARENT_PID",
    "PYTEST_CURRENT_TEST",
    run_cache.CACHE_ENV,
    run_cache.WRITE_ENV,
}
_launch_kernel = local_provisioner.launch_kernel
_start_new_kernel = nbval.kernel.start_new_kernel
_state: dict = {
    "zygote": None,
    "factory": None,
    "env": None,
    "nbval": False,
    "forked": 0,
}


class Kernel(zygote.Agent):
    """A forked kernel as jupyter_client's LocalProvisioner uses a subprocess.Popen."""

    stdin = stderr = None

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def launch_kernel(cmd: list[str], **kwargs):
    """jupyter_client's launch_kernel: nbval's kernels forked from the zygote."""
    env = kwargs.get("env") or {}
    key = {k: v for k, v in env.items() if k not in PER_KERNEL}
    usable = (
        _state["nbval"]
        and cmd[:3] == [sys.executable, "-m", "ipykernel_launcher"]
        and _state["env"] in (None, key)
    )
    if not usable:
        return _launch_kernel(cmd, **kwargs)
    if _state["zygote"] is None:
        address = f"zerobook-zygotes-{os.getpid()}-{os.urandom(4).hex()}"
        started = dict(key, **{ADDRESS_ENV: address})
        _state["factory"] = zygote.Zygote(launch_env(started), FACTORY)
        _state["zygote"], _state["env"] = zygote.Zygote(started, MAIN), key
    err = kwargs.get("stderr")
    out = err.fileno() if hasattr(err, "fileno") else 2
    try:
        agent = _state["zygote"].start(
            cmd, env, cwd=str(kwargs.get("cwd") or os.getcwd()), out=out
        )
    except zygote.Unavailable:
        return _launch_kernel(cmd, **kwargs)
    _state["forked"] += 1
    return Kernel(_state["zygote"], agent.pid, None)


def launch_env(kernel_env: dict) -> dict:
    """The environment a kernel's launches start their zygote with: the kernel's, with what
    zerobook.launcher.command.run_env sets for the ranks, less each run's own variables."""
    ranks = command.run_env("", "", False, None, None)
    env = {k: v for k, v in kernel_env.items() if k in ranks or k not in os.environ}
    env.update({k: v for k, v in ranks.items() if os.environ.get(k) != v})
    return {k: v for k, v in env.items() if k not in supervisor.PER_RUN}


def start_new_kernel(*args, **kwargs):
    """nbval's: the kernel it starts (and only that one) is forked."""
    _state["nbval"] = True
    try:
        return _start_new_kernel(*args, **kwargs)
    finally:
        _state["nbval"] = False


def pytest_configure(config):
    if sys.platform.startswith("linux") and os.environ.get(OFF_ENV) != "0":
        local_provisioner.launch_kernel = launch_kernel
        nbval.kernel.start_new_kernel = start_new_kernel


def pytest_unconfigure(config):
    local_provisioner.launch_kernel = _launch_kernel
    nbval.kernel.start_new_kernel = _start_new_kernel
    for name in ("zygote", "factory"):
        if _state[name] is not None:
            _state[name].close()
