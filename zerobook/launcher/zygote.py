"""Notebook side: one process that has imported torch, from which each launch forks its agent.

Every launch ran `python -c "import runpy; from zerobook.launcher import agent; ..." <torchrun's
arguments>` (zerobook.launcher.launch): ~3 CPU-s of imports before torchrun read its arguments, paid again by every
launch of a notebook (a lab's test cell launches a dozen times). The zygote (the name Android
gives its preloaded app process) pays them once per notebook kernel: for each launch it forks a
new agent, which runs torchrun's main exactly as the command would, with the launch's
environment, working directory and output pipe, in a session of its own, and with the command
line and environment the command would have shown (`ps`, psutil and the launcher's cleanup find
the run's processes by them: they are written over the room the zygote keeps for them).

It is used only where nothing would differ: a launch outside any sandbox (a grading sandbox's
launch starts its own agent inside the sandbox) whose environment, apart from the run's own
variables, is the one the zygote was started with (torch reads some variables when imported).
ZEROBOOK_ZYGOTE=0 turns it off. Messages (JSON, over a Unix SOCK_SEQPACKET pair):
    launcher -> zygote: {"id", "argv", "env", "cwd"}, the output pipe's write end attached
    zygote -> launcher: {"ready"} once; {"id", "pid"} when forked; {"exit": pid, "code", "cpu"}
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from zerobook.launcher.zygote_main import blocks as _blocks

ZYGOTE_ENV = "ZEROBOOK_ZYGOTE"  # "0": every launch starts its own agent
ROOM = (
    16_384  # bytes of command line and of environment the zygote keeps for its agents'
)
ROOM_ENV = "ZEROBOOK_ZYGOTE_ROOM"
MAIN = str(Path(__file__).resolve().with_name("zygote_main.py"))  # the zygote's code
START_TIMEOUT_S = 120.0  # the zygote imports torch before it says it is ready


class Unavailable(Exception):
    """The zygote cannot start this launch (gone, or never ready): start the agent directly."""


class Agent:
    """An agent forked by the zygote, as the launcher uses a subprocess.Popen: pid, stdout,
    poll(), wait(), returncode (negative: the signal that ended it)."""

    def __init__(self, zygote: "Zygote", pid: int, stdout_fd: int | None):
        self.zygote, self.pid, self.returncode = zygote, pid, None
        self.stdout = None if stdout_fd is None else os.fdopen(stdout_fd, "rb", 0)

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.pid, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"agent {self.pid}", timeout)
            self.returncode = self.zygote.exit_code(self.pid, 0.05)
        return self.returncode


class Zygote:
    """The launcher's end of one zygote, started with environment `env` (`main`: another
    zygote's code, which calls zygote_main.serve); `Zygote.adopt`: one started elsewhere."""

    def __init__(self, env: dict, main: str = MAIN):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = f"import runpy; runpy.run_path({main!r}, run_name='__zygote__')"
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(theirs.fileno()), "-" * ROOM],
            env=dict(env, **{ROOM_ENV: "-" * ROOM}),
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        self._attach(ours, proc)

    @classmethod
    def adopt(cls, sock: socket.socket, proc) -> "Zygote":
        """A zygote started elsewhere, serving on `sock` (make test's notebook kernels are
        each handed one: tests/kernel_preload_main.py); `proc`: its pid, wait(timeout), kill()."""
        zygote = cls.__new__(cls)
        zygote._attach(sock, proc)
        return zygote

    def _attach(self, sock: socket.socket, proc) -> None:
        self.proc, self.sock, self.lock, self.alive = proc, sock, threading.Lock(), True
        self.forked: dict[str, int] = {}
        self.exits: dict[int, int] = {}
        self.cpu, self.ready, self.room = 0.0, None, None

    def start(
        self, argv: list[str], env: dict, cwd: str | None = None, out: int | None = None
    ) -> Agent:
        """Fork an agent that runs `argv` (torchrun's command) with `env` in `cwd` (this
        process's by default); its output on a pipe (Agent.stdout), or on descriptor `out`."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.ready is None and self.alive and time.monotonic() < deadline:
            self._receive(0.1)
        if not self.ready:
            raise Unavailable("the zygote is not ready")
        needed = [len(b) for b in _blocks(argv, env)]
        if any(n > room for n, room in zip(needed, self.room)):
            raise Unavailable("the command or the environment is longer than the room")
        read, write = os.pipe() if out is None else (None, os.dup(out))
        request = {
            "id": os.urandom(8).hex(),
            "argv": argv,
            "env": env,
            "cwd": cwd or os.getcwd(),
        }
        try:
            with self.lock:
                socket.send_fds(self.sock, [json.dumps(request).encode()], [write])
        except OSError as error:
            if read is not None:
                os.close(read)
            self.alive = False
            raise Unavailable(f"the zygote is gone ({error})") from None
        finally:
            os.close(write)
        while request["id"] not in self.forked:
            if not self.alive:
                if read is not None:
                    os.close(read)
                raise Unavailable("the zygote ended before it forked the agent")
            self._receive(0.05)
        return Agent(self, self.forked.pop(request["id"]), read)

    def exit_code(self, pid: int, wait: float) -> int | None:
        """The agent's exit code once the zygote has seen it end; None while it runs."""
        if pid not in self.exits:
            self._receive(wait)
        if pid not in self.exits and not self.alive and not psutil.pid_exists(pid):
            # the zygote died first: its agents got SIGTERM (parent-death signal)
            self.exits[pid] = -signal.SIGTERM
        return self.exits.pop(pid, None)

    def _receive(self, wait: float) -> None:
        """Read what the zygote has said (waiting up to `wait` s for it to say something)."""
        with self.lock:
            while self.alive and select.select([self.sock], [], [], wait)[0]:
                wait = 0.0
                data = self.sock.recv(1 << 16)
                if not data:
                    self.alive = False
                    break
                message = json.loads(data)
                if "ready" in message:
                    self.ready, self.room = message["ready"], message["room"]
                elif "pid" in message:
                    self.forked[message["id"]] = message["pid"]
                else:
                    self.exits[message["exit"]] = message["code"]
                    self.cpu += message["cpu"]

    def close(self) -> None:
        self.alive = False
        self.sock.close()  # the zygote reads EOF and exits
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_ZYGOTES: dict[tuple, Zygote] = {}
_LOCK = threading.Lock()
_OWNER = os.getpid()
_NEVER_STARTED: set[int] = set()  # this process's zygote never became ready: do without


def start(argv: list[str], env: dict, per_run: set) -> Agent | None:
    """Fork torchrun's agent for `argv` from this process's zygote for `env` (started on first
    use; the variables named in `per_run` are read when the run starts, not when torch is
    imported, so they may differ); None where the zygote is off or cannot (the launcher then
    runs `argv` itself)."""
    off = os.environ.get(ZYGOTE_ENV) == "0" or not sys.platform.startswith("linux")
    if (
        off or _NEVER_STARTED or os.getpid() != _OWNER
    ):  # (a forked copy: not its zygotes)
        return None
    key = tuple(sorted((k, v) for k, v in env.items() if k not in per_run))
    for _ in range(2):  # a zygote found gone (killed) is replaced once
        zygote = _zygote_for(key)
        try:
            return zygote.start(argv, env)
        except Unavailable:
            if zygote.ready is None:  # it never started: this process starts its own
                _NEVER_STARTED.add(os.getpid())
            if zygote.alive or zygote.ready is None:
                return None
    return None


def _zygote_for(key: tuple) -> Zygote:
    with _LOCK:
        zygote = _ZYGOTES.get(key)
        if zygote is None or not zygote.alive:
            while (
                len(_ZYGOTES) >= 2
            ):  # an environment seldom changes: keep the last two
                _ZYGOTES.pop(next(iter(_ZYGOTES))).close()
            zygote = _ZYGOTES[key] = Zygote(dict(key))
        return zygote


def cpu_seconds() -> float:
    """CPU seconds of the agents (with the ranks they waited for) that this process's zygotes
    forked and saw end: they are the zygotes' children, not this process's."""
    return sum(z.cpu for z in list(_ZYGOTES.values()))
