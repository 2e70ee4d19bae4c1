"""A rank's record of collectives, witnessed as it happens by a process the rank's code cannot
reach: the rank's watcher (zerobook.launcher.rank_entry), its parent.

    send(["grad", "embed.weight"], 12)      # rank side (zerobook.data_parallel.inflight): one line, now
    data, status = collect(read_fd, child)  # the watcher: every line, until the rank ends
    seal(report_dir, rank, data, token)     # the watcher: rank{r}.witness, signed under its token
    lines = witnessed(report_dir, tokens)   # the launcher: {rank: [[event, count], ...]}
    check(report, lines)                    # the grader (zerobook.grading): the record unchanged

A lab harness keeps its record of a step's events in the rank's own process, where the student's
code runs too, and reports it at the end; code that rewrites the list (and the process group's
counts beside it, zerobook.data_parallel.inflight) in between would make the report say what did not happen.
So every event also leaves the process the moment it is recorded, as a line down a pipe to the
watcher, which keeps them and, when the rank has ended, writes them signed with a secret of its
own (read after the rank was forked, so the rank never held it; the watcher of a graded rank is
made non-dumpable, so the rank cannot read it from its memory). The grader then requires the
reported record to be exactly what was witnessed: a record rewritten after the fact fails, and a
line forged down the pipe in its time must agree with the process group's own count then.
"""

from __future__ import annotations

import hmac
import json
import os
import select
from pathlib import Path

WITNESS_FD_ENV = "ZEROBOOK_WITNESS_FD"  # the rank's end of the pipe to its watcher
MAX_BYTES = (
    16 * 2**20
)  # what a watcher keeps of its rank's lines; beyond it, the record is void
RECORD_KEY = "record"  # a report's raw record: {"events": [...], "counts": [...]}


def send(event: list, count: int) -> None:
    """Down the pipe to this rank's watcher, if it has one: one JSON line, written at once."""
    fd = os.environ.get(WITNESS_FD_ENV)
    if fd:
        os.write(int(fd), (json.dumps([event, count]) + "\n").encode())


def collect(read_fd: int, child: int) -> tuple[bytes, int]:
    """The watcher: read the rank's lines until it ends (EOF, or the rank reaped and nothing
    more to read); (the lines, capped, and the rank's wait status)."""
    data, status, done = bytearray(), None, False
    while not done:
        ready, _, _ = select.select([read_fd], [], [], 0.5)
        chunk = os.read(read_fd, 1 << 16) if ready else b""
        data += chunk[: MAX_BYTES + 1 - len(data)]
        if ready and not chunk:
            done = True  # every writer gone: the rank ended
        if status is None:
            pid, code = os.waitpid(child, os.WNOHANG)
            status = code if pid else None
        done = done or (status is not None and not ready)
    if status is None:
        _, status = os.waitpid(child, 0)
    return bytes(data), status


def mark(token: str, data: bytes) -> str:
    return hmac.new(token.encode(), data, "sha256").hexdigest()


def take_token(report_dir: str, rank: int, attempt: int) -> str | None:
    """The watcher, just after forking its rank: its secret, read and deleted."""
    path = Path(report_dir) / f".wtoken{rank}.{attempt}"
    token = path.read_text() if path.is_file() else None
    path.unlink(missing_ok=True)
    return token


def seal(report_dir: str, rank: int, data: bytes, token: str | None) -> None:
    """The watcher, after its rank ended: the lines and their mark (if any were sent)."""
    if data and token:
        folder = Path(report_dir)
        (folder / f"rank{rank}.witness").write_bytes(data)
        (folder / f"rank{rank}.witness.mark").write_text(mark(token, data))


def witnessed(
    report_dir: str, tokens: dict[int, set[str]], read
) -> dict[int, list | None]:
    """The launcher: each rank's witnessed lines, parsed, where its watcher's mark holds
    (None where lines are there but the mark does not hold: not the watcher's); `read(path,
    limit)`: the launcher's untrusted read (None for no file)."""
    out = {}
    for rank, valid in tokens.items():
        data = read(Path(report_dir) / f"rank{rank}.witness", MAX_BYTES + 1)
        if data is None:
            continue
        signed = read(Path(report_dir) / f"rank{rank}.witness.mark", 1024)
        ok = signed is not None and any(signed == mark(t, data.encode()) for t in valid)
        out[rank] = parsed(data) if ok and len(data) <= MAX_BYTES else None
    return out


def parsed(data: str) -> list | None:
    """The witnessed lines, each [event, count]; None if any is not (written by another)."""
    try:
        lines = [json.loads(line) for line in data.splitlines()]
    except ValueError:
        return None
    return lines if all(isinstance(x, list) and len(x) == 2 for x in lines) else None


def check(report: dict, lines: list | None) -> str | None:
    """What is wrong with a report's raw record against what its rank's watcher saw, or None."""
    record = report.get(RECORD_KEY)
    if record is None:
        return None
    if lines is None and not record.get("events"):
        return None  # nothing happened, nothing sent (a run that failed at once)
    if lines is None:
        return "the record's witness is missing or was changed"
    seen = [tuple(map(json.dumps, line)) for line in lines]
    told = [
        tuple(map(json.dumps, pair)) for pair in zip(record["events"], record["counts"])
    ]
    if seen == told:
        return None
    at = next(
        (i for i, (a, b) in enumerate(zip(seen, told)) if a != b),
        min(len(seen), len(told)),
    )
    shown = lines[at][0] if at < len(lines) else "its end"
    return (
        f"the record reported differs from what happened, from event {at} ({shown}) on"
    )
