"""A launch recorded once and replayed: the tests run a lab's instructor notebook and its student
version with the reference filled in, which launch the same parts of the same file (same lab,
part, ranks, options and student file, to the byte); whichever runs second replays the first
one's launches instead of launching again.

    ZEROBOOK_RUN_CACHE=DIR ZEROBOOK_RUN_CACHE_WRITE=new  # replay, or launch and record
    ZEROBOOK_RUN_CACHE=DIR ZEROBOOK_RUN_CACHE_WRITE=1    # launch, then record
    ZEROBOOK_RUN_CACHE=DIR                               # replay what was recorded

Grading does not use it: a submission's only execution is its clean run
(zerobook.classroom.grade).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from zerobook.trust import untrusted
from zerobook.launcher.launch import LaunchError, RunResult

CACHE_ENV, WRITE_ENV = "ZEROBOOK_RUN_CACHE", "ZEROBOOK_RUN_CACHE_WRITE"
NEW = "new"  # WRITE_ENV's value for: replay what is recorded, launch and record what is not
STUDENT_FILE_BYTES = 16 * 2**20  # the most of a student's rank script the grader reads


def key(lab: str, student_file: str, part: str, nproc: int, options: dict) -> str:
    """What a launch's result depends on: the part, the ranks, the options and the file's bytes
    (read as untrusted: the clean run's sandboxes may write its folder; zerobook.trust.untrusted)."""
    h = hashlib.sha256(
        json.dumps(
            [lab, part, nproc, sorted((k, repr(v)) for k, v in options.items())]
        ).encode()
    )
    try:
        h.update(untrusted.read_bytes(student_file, STUDENT_FILE_BYTES))
    except OSError as exc:  # none, or not a regular file of at most STUDENT_FILE_BYTES
        h.update(f"(no file: {exc})".encode())
    return h.hexdigest()


def replay(name: str):
    """The recorded RunResult of launch `name` (LaunchError raised again, if it failed), or None."""
    folder = os.environ.get(CACHE_ENV)
    path = (
        Path(folder) / f"{name}.json"
        if folder and os.environ.get(WRITE_ENV, "") in ("", NEW)
        else None
    )
    if path is None or not path.is_file():
        return None
    record = json.loads(path.read_text())
    print(record["log"], flush=True)  # the ranks' output, as the launch showed it
    if "error" in record:
        raise LaunchError(record["error"], log=record["log"])
    return RunResult(
        ranks=record["ranks"], log=record["log"], seconds=record["seconds"]
    )


def record(name: str, launch):
    """Run `launch()`; in the clean run (or a test's, WRITE_ENV=new), record its result or its
    LaunchError under `name`."""
    folder = os.environ.get(CACHE_ENV) if os.environ.get(WRITE_ENV) else None
    try:
        result = launch()
    except LaunchError as exc:
        if folder:
            write(Path(folder) / f"{name}.json", {"error": str(exc), "log": exc.log})
        raise
    if folder:
        write(
            Path(folder) / f"{name}.json",
            {"ranks": result.ranks, "log": result.log, "seconds": result.seconds},
        )
    return result


def write(path: Path, record: dict) -> None:
    """Whole or not at all: a kernel replaying it beside the launch never reads half a file."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(record))
    os.replace(partial, path)
