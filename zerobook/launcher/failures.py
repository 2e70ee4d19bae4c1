"""How a launched run failed, in words: the rank that failed first, and why.

A rank that raised leaves a timestamped record (zerobook.launcher.rank_records); one killed by a signal
cannot, but its watcher records the signal (zerobook.launcher.rank_entry, zerobook.launcher.rank_fresh); a rank
that only lost its peer is a consequence, not a cause. `raise_if_failed` turns that into one
LaunchError naming the rank, with its traceback or last lines; mismatched or stuck collectives
are named (`explain`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from zerobook.trust import untrusted

TAIL_LINES = 25
# the most the launcher reads of a rank's report, failure or signal record, finish mark
REPORT_BYTES, RECORD_BYTES, DONE_BYTES = 64 * 2**20, 2**20, 1_024
MAX_RECORDS = 1_024  # failure (or signal) records read: one per rank
# a consequence of another rank's failure
LOST_PEER = re.compile(r"Connection (closed|reset) by peer")


class LaunchInterrupted(KeyboardInterrupt):
    """The user interrupted a launch (Jupyter's ■, Ctrl-C); every rank has been stopped already.
    IPython and Jupyter show `_render_traceback_` instead of a traceback: one line."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


class LaunchError(RuntimeError):
    """A launched run failed: a rank raised or died, it timed out, or it could not start."""

    def __init__(self, message: str, *, rank: int | None = None, log: str = ""):
        super().__init__(message)
        self.rank = rank
        self.log = log


def run_file(path: Path, limit: int) -> str | None:
    """The text a rank left at `path` (None if none), read as untrusted (zerobook.trust.untrusted):
    LaunchError if it is not a regular file of at most `limit` bytes (a link, a FIFO...)."""
    try:
        return untrusted.read_text(path, limit) if os.path.lexists(path) else None
    except (OSError, ValueError) as exc:
        raise LaunchError(f"the run's {path.name} cannot be trusted: {exc}") from None


def read_json(path: Path, limit: int) -> dict:
    """run_file's text as JSON ({} if nothing is there)."""
    return json.loads(run_file(path, limit) or "{}")


def records(report_dir: str, kind: str) -> list[dict]:
    """The ranks' records of `kind` ("error", "signal"): rank*.KIND.json, at most MAX_RECORDS."""
    paths = sorted(Path(report_dir).glob(f"rank*.{kind}.json"))[:MAX_RECORDS]
    return [read_json(path, RECORD_BYTES) for path in paths]


def issue_tokens(report_dir: str, nproc: int, attempts: int, name=".token") -> dict:
    """A secret per rank and attempt, left where only that rank's zerobook.launcher.rank_entry reads it
    (and deletes it before its target runs: rank -> the tokens that prove it finished), or
    its watcher (name=".wtoken": zerobook.trust.witness.take_token)."""
    import secrets

    tokens: dict[int, set[str]] = {}
    for rank in range(nproc):
        for attempt in range(attempts):
            token = secrets.token_hex(16)
            (Path(report_dir) / f"{name}{rank}.{attempt}").write_text(token)
            tokens.setdefault(rank, set()).add(token)
    return tokens


def raise_if_unfinished(
    report_dir: str, tokens: dict[int, set[str]], stream, target: str
) -> dict[int, str]:
    """Each rank's report, as the rank wrote it: {rank: its text ("" if none)}. Raise
    LaunchError for a rank that exited 0 without its script returning (its code ended the
    process early, so what it reported is not the script's result), or whose report is not the
    one its finish mark signs (zerobook.launcher.dist.finish_mark: another process of the run wrote it)."""
    from zerobook.launcher.dist import finish_mark

    reports = {}
    for rank, valid in tokens.items():
        done = Path(report_dir) / f"rank{rank}.done"
        report = Path(report_dir) / f"rank{rank}.json"
        reports[rank] = run_file(report, REPORT_BYTES) or ""
        mark = run_file(done, DONE_BYTES)
        if mark is None:
            raise LaunchError(
                f"rank {rank} ended before {target} finished, with no error: something in "
                f"it ended the process early (os._exit, say), so its results do not count; "
                f"its last lines:\n{last_lines(stream, rank)}",
                rank=rank,
                log="\n".join(stream.log),
            )
        if not any(mark == finish_mark(t, reports[rank]) for t in valid):
            raise LaunchError(
                f"rank {rank}'s report was changed after rank {rank} wrote it (by another "
                "process of the run), so the run's results do not count",
                rank=rank,
                log="\n".join(stream.log),
            )
    return reports


def raise_if_failed(report_dir: str, stream, target: str) -> None:
    """Raise LaunchError for the rank that failed first, with its last lines.

    A rank that raised leaves a timestamped record. A rank killed by a signal leaves only its
    watcher's record of the signal (or torchrun's root cause names it), and its peers then fail
    with "connection closed": the killed rank comes first.
    A rank that failed only because its peer's connection closed (the peer timed out in a
    collective, say, and gloo dropped the link before the peer's record was written) is a
    consequence: it counts as first only if no other rank recorded a failure.
    """
    failures = sorted(
        records(report_dir, "error"),
        key=lambda f: (bool(LOST_PEER.search(f["summary"])), f["time"]),
    )
    recorded = [f["rank"] for f in failures]
    log = "\n".join(stream.log)
    deaths = {**signal_deaths(stream.agent), **recorded_deaths(report_dir)}
    killed = {
        r: sig for r, sig in deaths.items() if r not in recorded and sig != "SIGTERM"
    }  # SIGTERM: torchrun stopping the rest
    if killed:
        rank = min(killed)
        also = f" (then rank(s) {sorted(recorded)} lost it)" if recorded else ""
        raise LaunchError(
            f"rank {rank} died: killed by {killed[rank]}{also}; its last lines:\n"
            f"{crash_lines(stream, rank)}",
            rank=rank,
            log=log,
        )
    if failures:
        first = failures[0]
        also = (
            f" (then rank(s) {sorted(recorded[1:])} failed too)" if recorded[1:] else ""
        )
        tb = "\n".join(first["traceback"].rstrip().splitlines()[-TAIL_LINES:])
        raise LaunchError(
            f"rank {first['rank']} failed: {explain(first)}{also}\n"
            f"--- rank {first['rank']} traceback (last lines) ---\n{tb}",
            rank=first["rank"],
            log=log,
        )
    if stream.returncode:
        rank, how = root_cause(stream.agent)
        where = f"rank {rank}" if rank is not None else "torchrun"
        tail = last_lines(stream, rank)
        raise LaunchError(
            f"{where} failed running {target} ({how or f'exit code {stream.returncode}'}); "
            f"last lines:\n{tail}",
            rank=rank,
            log=log,
        )


def last_lines(stream, rank: int | None) -> str:
    """Rank `rank`'s last lines; else what torchrun and the sandbox printed (bwrap's own
    errors among them); never nothing."""
    tail = stream.tail(rank) if rank is not None else ""
    tail = tail.strip() or "\n".join(list(stream.agent)[-TAIL_LINES:]).strip()
    return tail or "(none: nothing was printed)"


def crash_lines(stream, rank: int) -> str:
    """A rank's last lines after a fatal signal: faulthandler's dump without the frames of
    torch, Python's runpy and multiprocessing, and the launcher (LIBRARY)."""
    lines = [
        line
        for line in stream.last.get(rank, [])
        if not line.startswith("Extension modules:")
        and not library_frame(FRAME.match(line))
    ]
    return "\n".join(lines[-TAIL_LINES:]).strip() or last_lines(stream, rank)


MISMATCH = re.compile(
    r"Rank (\d+) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d+), "
    r"OpType=(\w+), TensorShape=(\[[^\]]*\])"
)


def explain(failure: dict) -> str:
    """A failure's one-line summary, naming the collectives for a mismatch or a stuck collective."""
    summary = failure["summary"]
    found = MISMATCH.findall(summary)
    if len(found) >= 2:
        (r0, seq, op0, shape0), (r1, _, op1, shape1) = found[:2]
        return (
            f"mismatched collectives: rank {r0} called {op0} {shape0} while rank {r1} called "
            f"{op1} {shape1} (collective #{seq})"
        )
    stuck = failure.get("collective")
    if stuck and re.search(r"timed? ?out|monitoredBarrier", summary, flags=re.I):
        return f"stuck in {stuck}: {summary}"
    return summary


def signal_deaths(agent_lines: list[str]) -> dict[int, str]:
    """Ranks torchrun reports as ended by a signal, e.g. {1: "SIGSEGV"}, from its failure summary."""
    pattern = r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*-\d+[^\n]*?\((SIG\w+)\)"
    return {int(rank): sig for rank, sig in re.findall(pattern, "\n".join(agent_lines))}


def recorded_deaths(report_dir: str) -> dict[int, str]:
    """Ranks their watcher saw ended by a signal (zerobook.launcher.rank_entry), e.g. {1: "SIGKILL"}:
    torchrun's summary of ranks it forked names only the first failure it saw."""
    return {r["rank"]: r["signal"] for r in records(report_dir, "signal")}


def root_cause(agent_lines: list[str]) -> tuple[int | None, str]:
    """The rank torchrun names under 'Root Cause', and how it died (a signal leaves no record)."""
    text = "\n".join(agent_lines)
    match = re.search(
        r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)[^\n]*?(\(SIG\w+\))?\s*$",
        text,
        flags=re.S | re.M,
    )
    if not match:
        return None, ""
    signal_name = f" {match.group(3)}" if match.group(3) else ""
    return int(match.group(1)), f"exit code {match.group(2)}{signal_name}"


FRAME = re.compile(
    r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)'
)
LIBRARY = (
    "/torch/",
    "/threading.py",
    "runpy",
    "/zerobook/launcher/rank_entry.py",
    "/zerobook/launcher/lifeline.py",  # a fresh rank's thread that watches for its watcher's end
    "/site-packages/",
    "/multiprocessing/",  # a forked rank's stack holds torchrun's agent's frames below its own
)
DUMP_START = (
    "Current thread ",
    "Thread 0x",
)  # faulthandler's first line of each thread


def library_frame(match) -> bool:
    """A faulthandler frame (a FRAME match, or None) in torch, Python's machinery or the launcher."""
    return match is not None and any(x in match["file"] for x in LIBRARY)


def where_stuck(lines: list[str]) -> str:
    """From a rank's faulthandler dump (most recent call first): its innermost frames outside
    torch and the launcher, as "file:line in function", or "" if it printed none."""
    frames = [m for m in map(FRAME.match, lines) if m and not library_frame(m)]
    inner = list(
        dict.fromkeys(
            f"{m['file'].rsplit('/', 1)[-1]}:{m['line']} in {m['function']}"
            for m in frames
        )
    )
    return " <- ".join(inner[:3])


def before_dump(lines: list[str], n: int = 5) -> str:
    """A rank's last `n` lines before the stack dump the timeout asked for."""
    start = next(
        (k for k, line in enumerate(lines) if line.startswith(DUMP_START)), len(lines)
    )
    return "\n".join(lines[:start][-n:]) or "(nothing)"


def timeout_message(target: str, stream) -> str:
    """What a timed-out run tells: every rank stopped, where each one was (its Python stack, asked
    for before it was stopped), and each rank's last lines."""
    stuck = {r: where_stuck(list(stream.last.get(r, []))) for r in sorted(stream.ranks)}
    places = "\n".join(
        f"  rank {r}: {where or '(no Python stack: it did not answer)'}"
        for r, where in stuck.items()
    )
    in_collective = [
        r for r in stuck if "distributed_c10d" in "".join(stream.last.get(r, []))
    ]
    hint = (
        f"ranks {in_collective} were waiting in a collective that another rank never reached"
        if in_collective
        else "no rank was in a collective: a loop or a sleep in the code above"
    )
    tails = "\n".join(
        f"--- rank {r}, last lines ---\n{before_dump(list(stream.last.get(r, [])))}"
        for r in sorted(stream.ranks)
    )
    return (
        f"{target} timed out; every rank was stopped. Where each rank was:\n{places}\n"
        f"({hint}; try debug=True to check every collective matches)\n{tails}"
    )
