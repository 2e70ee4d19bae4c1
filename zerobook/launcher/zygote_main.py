"""The zygote itself (zerobook.launcher.zygote starts it, by path: nothing of the launcher is loaded):
it imports what every torchrun agent imports first, then forks an agent for each request and
tells the launcher when each ends. Only the standard library and zerobook.launcher.lifetime are loaded
here, so the agents and their ranks start with what `python -c PRELOAD_AND_RUN_TORCHRUN` has.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import tempfile


def serve(fd: int, preload=None, run=None) -> None:
    """The zygote: import what every agent imports first, then fork an agent per request.
    (`preload()` and `run(argv)` are another zygote's: tests/kernel_preload_main.py forks
    notebook kernels so.)"""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the notebook's interrupt is its own
    if preload is None:
        from zerobook.launcher import agent

        preload = agent.preload  # what command.PRELOAD_AND_RUN_TORCHRUN runs first
    preload()

    # what is loaded now lives as long as every fork: out of the collector's sight, its pages
    # stay shared with the forks (a collection writes to every object it visits: copy-on-write)
    gc.collect()
    gc.freeze()

    sock = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # what Python itself added to its environment as it started (PEP 538's LC_CTYPE), which a
    # freshly started agent would add too; and whether our command line can be written at all
    with open("/proc/self/environ", "rb") as f:
        given = {
            item.split(b"=", 1)[0].decode() for item in f.read().split(b"\0") if item
        }
    added = {k: v for k, v in os.environ.items() if k not in given}
    areas = _areas()
    writable = _rewrite(areas, [_raw(name) for name in AREAS])
    room = [end - start for start, end in areas] if writable else None
    sock.send(json.dumps({"ready": writable, "room": room}).encode())
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
        _reap(sock)
        if sock in ready:
            try:
                data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 1)
            except OSError:
                data = b""
            if not data:
                return  # the launcher's process is gone: so are we (our agents get SIGTERM)
            request = json.loads(data)
            session_r, session_w = (
                os.pipe()
            )  # closed once the fork leads its own session
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_r), os.close(wake_w), sock.close(), os.close(session_r)
                _agent(request, fds[0], added, session_w, run)  # never returns
            os.close(fds[0]), os.close(session_w)
            # its pid is told once it has its session: a signal to its process group (as
            # jupyter_client signals a kernel's) must never reach this zygote's group
            os.read(session_r, 1), os.close(session_r)
            sock.send(json.dumps({"id": request["id"], "pid": pid}).encode())


def _reap(sock) -> None:
    """Tell the launcher about every agent that has ended: its exit code and CPU seconds."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        cpu = usage.ru_utime + usage.ru_stime
        code = os.waitstatus_to_exitcode(status)
        try:
            sock.send(json.dumps({"exit": pid, "code": code, "cpu": cpu}).encode())
        except OSError:
            return


def _agent(request: dict, out: int, added: dict, session: int, run=None) -> None:
    """The forked agent: the launch's session, output, directory, environment and command
    line, then torchrun's main, as `python -c PRELOAD_AND_RUN_TORCHRUN ...` runs it (or
    `run(argv)`, another zygote's)."""
    code = 1
    try:
        from zerobook.launcher.lifetime import die_with_parent

        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        os.close(session)
        die_with_parent(signal.SIGTERM, os.getppid())
        null = os.open(os.devnull, os.O_RDONLY)
        for fd, to in ((null, 0), (out, 1), (out, 2)):
            os.dup2(fd, to)
        os.close(null)
        os.close(out)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.update({k: v for k, v in added.items() if k not in request["env"]})
        show_as(request["argv"], request["env"])
        tempfile.tempdir = None  # found again from this launch's TMPDIR
        (run or _torchrun)(request["argv"])
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (stop.code is not None)
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - what an interpreter would print, then its exit code
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
                pass
        os._exit(code)


def _torchrun(argv: list[str]) -> None:
    """torchrun's main, as `python -c PRELOAD_AND_RUN_TORCHRUN <torchrun's arguments>` runs it."""
    import runpy

    sys.argv = ["-c", *argv[3:]]
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)


AREAS = ("cmdline", "environ")


def _areas() -> list[tuple[int, int]]:
    """Where this process's original command line and environment lie in its memory."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # proc(5): arg_start, arg_end, env_start, env_end are fields 48-51 (index n - 3 here)
    arg_start, arg_end, env_start, env_end = (int(fields[i]) for i in range(45, 49))
    return [(arg_start, arg_end), (env_start, env_end)]


def _raw(name: str) -> bytes:
    with open(f"/proc/self/{name}", "rb") as f:
        return f.read()


def _rewrite(areas, blocks: list[bytes]) -> bool:
    """Write each block over its area, padded with NULs; False, writing nothing, where one does
    not fit or /proc/self/mem cannot be written."""
    if any(len(b) > end - start for b, (start, end) in zip(blocks, areas)):
        return False
    try:
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            for block, (start, end) in zip(blocks, areas):
                mem.seek(start)
                mem.write(block.ljust(end - start, b"\0"))
        return True
    except OSError:
        return False


def blocks(argv: list[str], env: dict) -> list[bytes]:
    """A command line and an environment as /proc/PID/cmdline and /proc/PID/environ hold them."""
    return [
        b"".join(os.fsencode(s) + b"\0" for s in items)
        for items in (argv, [f"{k}={v}" for k, v in env.items()])
    ]


def show_as(argv: list[str], env: dict) -> bool:
    """Write `argv` and `env` over this process's original command line and environment: what
    /proc/PID/cmdline and /proc/PID/environ show, as if it had been started with them (the
    launcher has checked that they fit)."""
    return _rewrite(_areas(), blocks(argv, env))


if __name__ == "__zygote__":
    serve(int(sys.argv[1]))
