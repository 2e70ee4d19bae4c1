"""nbgrader commands forked from one process that imported nbgrader once (Linux, macOS).

    returncode, printed = command(["autograde", "ddp", "--student", "ada"], labs, env, 900)

Importing nbgrader costs ~4 s of CPU, most of what one command costs; a class runs two a
submission (autograde, generate_feedback). `command` asks this module's server, started
once per grader (`python -m zerobook.classroom.nbgrader_fork SOCKET`), to fork: the fork
takes the command's folder, environment and argv, writes what it prints to a file of the
grader's, and sends its pid, then its exit status, over its own connection to a Unix
socket in a folder only the grader can open. The server imports nothing of the caller's
(multiprocessing's forkserver runs the caller's __main__ again in each child: a script
without a main guard would grade itself). It ends when the grader's end of its stdin
closes. Where os.fork is missing (Windows), nbgrader_app runs a fresh process instead.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading

_SERVER: list = [None]  # (process, socket path) of this grader's server
NOT_RUN = "Error: nbgrader's fork server did not run the command"
# after nbgrader ends, how long what is still in its pipe may take to arrive
PUMP_S = 10
_LOCK = threading.Lock()


def command(argv, cwd, env, timeout) -> tuple[int | None, str]:
    """`python -m nbgrader ARGV` in `cwd` with environment `env`, as a fork: (its exit
    status, or None once killed past `timeout` s; what it printed, stdout and stderr)."""
    path = _server()
    with tempfile.TemporaryDirectory(prefix="zerobook-nbgrader-") as folder:
        out = os.path.join(folder, "printed")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            request = {"argv": list(argv), "cwd": str(cwd), "env": env, "out": out}
            try:
                conn.connect(path)
                conn.sendall(json.dumps(request).encode() + b"\n")
            except OSError:  # the server ended, or closed, before reading the request
                return 1, NOT_RUN
            conn.settimeout(timeout)
            reader = conn.makefile("r")
            try:
                said = reader.readline().split()
            except TimeoutError:  # the server never forked: nothing to kill
                return None, ""
            except ConnectionError:  # closed, the request unread
                said = []
            if len(said) != 2:  # the server closed the connection without forking
                return 1, NOT_RUN
            pid = int(said[1])
            try:
                said = reader.readline().split()
            except ConnectionError:  # the fork ended without saying how
                said = []
            except BaseException as stopped:  # past the timeout, or interrupted
                _kill(pid)
                if isinstance(stopped, TimeoutError):
                    return None, ""
                raise
        code = int(said[1]) if said else -signal.SIGKILL  # killed before it could say
        if not os.path.exists(out):
            return code, ""
        with open(out, errors="replace") as printed:
            return code, printed.read()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _server() -> str:
    """This grader's server's socket, the server started (and nbgrader imported) if need be."""
    with _LOCK:
        if _SERVER[0] is None or _SERVER[0][0].poll() is not None:
            folder = tempfile.mkdtemp(prefix="zerobook-nbgrader-server-")  # mode 0700
            path = os.path.join(folder, "socket")
            process = subprocess.Popen(
                [sys.executable, "-m", __name__, path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            if process.stdout.readline() != b"ready\n":
                raise RuntimeError("nbgrader's fork server did not start")
            _SERVER[0] = (process, path)
        return _SERVER[0][1]


def serve(path: str) -> None:
    """Import nbgrader, then fork a child for each connection until stdin closes."""
    import zerobook  # noqa: F401 - first: jsonschema's IRI grammar built if used (_lazy_iri)
    from nbgrader import api
    from nbgrader.apps.nbgraderapp import NbGraderApp  # noqa: F401 - what forks share

    head = _alembic_head()
    if head:  # a new gradebook records it without starting `alembic heads` (~3 CPU-s)
        api.get_alembic_version = lambda: head

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the system
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return  # the grader is gone
        if listener in ready:
            conn, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                _child(conn)
            conn.close()


def _alembic_head() -> str | None:
    """The newest of nbgrader's gradebook migrations, which nbgrader.api.get_alembic_version
    asks a new process (`alembic heads`) for each time it creates a gradebook, read by alembic's
    own API; None where that fails (nbgrader then asks the command)."""
    try:
        from alembic.config import Config
        from alembic.script import ScriptDirectory
        from nbgrader.dbutil import _temp_alembic_ini

        with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
            return ScriptDirectory.from_config(Config(ini)).get_current_head()
    except Exception:  # noqa: BLE001 - another alembic or nbgrader: their own way
        return None


def _pipe_into(out: str) -> threading.Thread:
    """fds 1 and 2 become a pipe that a thread copies into the file `out`: the kernels nbgrader
    starts inherit the pipe (they may add lines, as to the pipe of a fresh nbgrader), never
    the file (which they could truncate, rewrite or read)."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # not inheritable
    read_end, write_end = os.pipe()

    def copy() -> None:
        while chunk := os.read(read_end, 65536):
            os.write(fd, chunk)
        os.close(fd)

    pump = threading.Thread(target=copy, daemon=True)
    pump.start()
    for stream in (1, 2):
        os.dup2(write_end, stream)
    os.close(write_end)
    return pump


def _child(conn: socket.socket) -> None:
    """In the fork: run the request as `python -m nbgrader` would; say pid, then status."""
    code = 1
    try:
        request = json.loads(conn.makefile("r").readline())
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # nbgrader waits for its kernels
        conn.sendall(f"pid {os.getpid()}\n".encode())
        pump = _pipe_into(request["out"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # TMPDIR as the request says
        sys.argv = [sys.executable, "-m", "nbgrader", *request["argv"]]
        from nbgrader.apps.nbgraderapp import NbGraderApp

        NbGraderApp.launch_instance(request["argv"])
        code = 0
    except SystemExit as exc:  # as the interpreter ends on it
        code = 0 if exc.code is None else exc.code
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - printed, as Python would
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - a closed stream: nothing to flush
                pass
        try:
            os.close(1), os.close(2)  # the pipe's last writers, once the kernel is gone
            pump.join(PUMP_S)
        except Exception:  # noqa: BLE001, S110 - it failed before the pipe was made
            pass
        try:
            conn.sendall(f"exit {code}\n".encode())
        finally:
            os._exit(code)


if __name__ == "__main__":
    serve(sys.argv[1])
