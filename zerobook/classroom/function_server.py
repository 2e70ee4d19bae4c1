"""The functions a student wrote in the notebook itself, run for the clean run in a sandbox of
their own (zerobook.classroom.clean_score): the trusted side calls them through proxies, their
arguments and results crossing as JSON lines, their exceptions by name. The student's cells run
on their own, under their lab's rules (zerobook.trust.restricted.run), not beside the course's
setup cell: what the tests compare with (Lab 1's calculator) is not a name they can call.

    server = FunctionServer(student_code, workdir, "memory")
    server.call("expected_total", [4], {})   # -> 10, or the student's exception
"""

from __future__ import annotations

import builtins
import json
import signal
import subprocess
import sys
from pathlib import Path

from zerobook.classroom import sandbox

CALL_TIMEOUT_S = 60  # one call of a notebook function in the sandbox
MAX_REPLY_CHARS = 64 * 2**20  # one answer of the function server (a JSON line) at most


class FunctionServer:
    """The student's notebook functions, run in a sandboxed process (SERVER below): `call(name,
    args, kwargs)` sends JSON, gets the result back, or raises the student's exception (by name:
    builtins' types as they are, anything else as RuntimeError)."""

    def __init__(self, student: str, workdir: Path, lab: str):
        argv = sandbox.command([sys.executable, "-c", SERVER], writable=[str(workdir)])
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            preexec_fn=sandbox.set_limits,
        )
        self.send({"student": student, "lab": lab})
        try:
            self.started = self.receive()
        except (
            TimeoutError,
            RuntimeError,
        ) as exc:  # it looped, or ended the process, before defining anything
            self.started = {"ok": False, "error": str(exc)}

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict:
        def expired(*_):
            raise TimeoutError(
                f"a notebook function ran longer than {CALL_TIMEOUT_S} s"
            )

        old = signal.signal(signal.SIGALRM, expired)
        signal.alarm(CALL_TIMEOUT_S)
        try:
            line = self.proc.stdout.readline(MAX_REPLY_CHARS + 1)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        if not line:
            raise RuntimeError(
                "your notebook's code ended the process (os._exit, a crash or a kill)"
            )
        if len(line) > MAX_REPLY_CHARS:
            raise RuntimeError(
                f"a notebook function's answer was longer than {MAX_REPLY_CHARS:,} characters"
            )
        return json.loads(line)

    def call(self, name: str, args, kwargs):
        if not self.started.get("ok"):
            raise RuntimeError(
                f"your notebook's code did not run: {self.started.get('error')}"
            )
        self.send({"call": name, "args": list(args), "kwargs": kwargs})
        reply = self.receive()
        if "error" in reply:
            kind = getattr(builtins, reply["type"], None)
            kind = (
                kind
                if isinstance(kind, type) and issubclass(kind, Exception)
                else RuntimeError
            )
            raise kind(reply["error"])
        return reply["value"]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


SERVER = r"""
import json, os, sys
channel = os.fdopen(os.dup(1), "w")  # the replies; print() goes to stderr, not here
os.dup2(2, 1)
first = json.loads(sys.stdin.readline())
namespace = {"__name__": "__main__"}
try:
    from zerobook.trust.restricted import run
    run(first["student"], "your notebook", first["lab"], namespace)
    channel.write(json.dumps({"ok": True}) + "\n")
except BaseException as exc:
    channel.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
channel.flush()
for line in sys.stdin:
    request = json.loads(line)
    try:
        value = namespace[request["call"]](*request["args"], **request["kwargs"])
        reply = json.dumps({"value": value})
    except BaseException as exc:
        reply = json.dumps({"error": f"{exc}", "type": type(exc).__name__})
    channel.write(reply + "\n")
    channel.flush()
"""
