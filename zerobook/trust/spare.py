"""The one process a confined rank may still have started: Lab 6's checkpoint reader.

    keep_for(target, rank)        # zerobook.launcher.rank_entry, before graded_rank.confine
    ask(path, shifted, out)       # the harness: the reader starts
    code = answer(timeout)        # ... its exit code once it has ended (None: past timeout)

A graded rank can start no process (zerobook.trust.graded_rank: seccomp fails fork and clone),
and Lab 6 reads the student's checkpoint back in a fresh interpreter, where the student's code
never ran (zerobook.labs.checkpoint_readback). So rank 0 of a run whose target is in READERS
forks, before the filter, a spare that waits on a pipe. Asked once, with three paths inside a
folder the harness made in the temporary directory, it starts exactly `python -m
zerobook.labs.checkpoint_readback PATH SHIFTED OUT`, waits for it and answers its exit code; it
runs nothing else, and ends with its rank. Outside a grading sandbox there is no spare: the
harness starts the reader itself.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import tempfile
import time
from pathlib import Path

READER = "zerobook.labs.checkpoint_readback"
READERS = {"zerobook.labs.fsdp2"}  # the targets whose rank 0 keeps a spare
PREFIX = "lab6-"  # the harness's folder (zerobook.labs.fsdp2.checkpoint)
_spare: dict = {}


def keep_for(target: str, rank: int) -> None:
    """Fork the spare (rank 0 of a target in READERS), before the rank is confined."""
    if target not in READERS or rank != 0 or _spare:
        return
    ask_r, ask_w = os.pipe()
    answer_r, answer_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(ask_w), os.close(answer_r)
            code = serve(ask_r, answer_w)
        finally:
            os._exit(code)
    os.close(ask_r), os.close(answer_w)
    _spare.update(pid=pid, ask=ask_w, answer=answer_r)


def serve(ask: int, answer: int) -> int:
    """The spare: read one request (the rank closing the pipe unasked ends it), check its
    paths, run the reader, answer its exit code."""
    from zerobook.launcher.lifetime import die_with_parent
    from zerobook.trust import graded_rank
    from zerobook.trust.witness import WITNESS_FD_ENV

    die_with_parent(signal.SIGKILL)
    graded_rank.undumpable()  # as its rank: its peers cannot read or write through it
    fd = os.environ.get(WITNESS_FD_ENV, "")
    if (
        fd.isdigit()
    ):  # the rank's record (zerobook.trust.witness): not the spare's to write
        os.close(int(fd))
    request = b""
    while chunk := os.read(ask, 1 << 16):
        request += chunk
    if not request:
        return 0
    try:
        paths = json.loads(request)
    except ValueError:
        paths = None
    if not allowed(paths):
        os.write(answer, b"-1")
        return 1
    argv, env = reader_command(paths), reader_env()
    pid = os.fork()
    if pid == 0:
        try:
            die_with_parent(signal.SIGKILL)
            os.chdir(os.path.dirname(os.path.realpath(paths[0])))
            os.execve(sys.executable, argv, env)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    os.write(answer, str(os.waitstatus_to_exitcode(status)).encode())
    return 0


def reader_command(paths) -> list[str]:
    """The reader's command: `python -m zerobook.labs.checkpoint_readback PATH SHIFTED OUT`."""
    return [sys.executable, "-m", READER, *map(str, paths)]


def reader_env() -> dict:
    """This process's environment with this package first on the path (the reader runs in
    the harness's folder, which holds nothing but checkpoints)."""
    package = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([package, path]))


def allowed(paths) -> bool:
    """Three paths, each in one folder the harness made (PREFIX) in the temporary directory."""
    if not (isinstance(paths, list) and len(paths) == 3):
        return False
    if not all(isinstance(p, str) for p in paths):
        return False
    folders = {Path(os.path.realpath(p)).parent for p in paths}
    root = Path(os.path.realpath(tempfile.gettempdir()))
    return len(folders) == 1 and all(
        f.parent == root and f.name.startswith(PREFIX) for f in folders
    )


def available() -> bool:
    return bool(_spare) and "asked" not in _spare


def ask(path, shifted, out) -> None:
    """Have the spare start the reader on these paths (once)."""
    _spare["asked"] = True
    os.write(_spare["ask"], json.dumps([str(path), str(shifted), str(out)]).encode())
    os.close(_spare["ask"])


def answer(timeout: float) -> int | None:
    """The reader's exit code once it has ended; None past `timeout` seconds."""
    deadline, said = time.monotonic() + timeout, b""
    while time.monotonic() < deadline:
        if select.select([_spare["answer"]], [], [], 0.1)[0]:
            chunk = os.read(_spare["answer"], 64)
            if not chunk:
                break
            said += chunk
    return int(said) if said.lstrip(b"-").isdigit() else None
