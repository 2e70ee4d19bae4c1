"""What a run established before it failed: a failure, as every part of a lab reports it.

A harness runs the student's steps inside `Steps`: an exception raised by the student's code
(or by torch, called from it) ends the steps, not the run. The harness then reports what it
recorded before, and `failed`:

    {"step": 1, "rank": 2, "error": "AttributeError: 'NoneType' object ...",
     "where": {"file": "ddp_student.py", "line": 31, "source": "...", "function": "on_grad"},
     "hint": "finish() must send the last bucket ...", "lost_peer": False}

`where` is the student's own line, the innermost frame of the student's file in the error's
chain (None when the error came from no line of theirs). A rank whose peer failed first
(its collective's connection closed) says so (`lost_peer`): the notebook names the rank
that failed first (zerobook.grading.failure). Each test that needs the step that failed
says "not checked: ..." and loses its points; what was shown before still counts.
"""

from __future__ import annotations

import os
import re
import traceback
from pathlib import Path

# a consequence of another rank's failure: its collective's link closed, or it timed out
LOST_PEER = re.compile(
    r"Connection (closed|reset) by peer|Broken pipe|timed out|Timed out|"
    r"failed to pass monitoredBarrier|NCCL communicator was aborted|"
    r"failed at step|failed in "
)
ERROR_CHARS = 600  # of the error's message (a tensor's repr can run on)


def student_frame(exc: BaseException, student_file: str) -> dict | None:
    """The innermost frame of the student's file in `exc`'s chain (its cause and context):
    file (its name only), line, source, function; None if no line of theirs ran."""
    path, seen, found = str(Path(student_file).resolve()), set(), None
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        frames = [
            f
            for f in traceback.extract_tb(exc.__traceback__)
            if str(Path(f.filename).resolve()) == path
        ]
        if frames and found is None:
            found = frames[-1]
        exc = exc.__cause__ or exc.__context__
    if found is None:
        return None
    return {
        "file": Path(found.filename).name,
        "line": found.lineno,
        "source": (found.line or "").strip(),
        "function": found.name,
    }


def error_text(exc: BaseException) -> str:
    """`Type: message`, short: a tensor a KeyError holds by its shape, gloo's fingerprints
    of mismatched collectives without their tensor options, cut at ERROR_CHARS."""
    if isinstance(exc, KeyError) and exc.args and hasattr(exc.args[0], "shape"):
        return f"KeyError: a tensor of shape {list(exc.args[0].shape)}"
    text = f"{type(exc).__name__}: {exc}"
    text = re.sub(
        r", TensorDeviceTypes=TensorOptions\([^()]*(\([^()]*\)[^()]*)*\)", "", text
    )
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + " ..."


def raised_by_them(exc: BaseException, student_file: str) -> bool:
    """Whether the student's own `raise` or `assert` made `exc`: its message is theirs (a
    hidden input or parameter could be written into it), not Python's or torch's words."""
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    if last is None or Path(last.filename).resolve() != Path(student_file).resolve():
        return False
    return (last.line or "").lstrip().startswith(("raise", "assert"))


def failure(exc, step, rank: int, student_file: str, hint: str = "") -> dict:
    """The record a part reports when the student's steps ended with `exc` at `step`
    (an int, or a word: "constructor"). An exception the student's code raised is told by
    its type and their line (`where`), not its message (raised_by_them)."""
    text = error_text(exc)
    if raised_by_them(exc, student_file):
        text = f"{type(exc).__name__}, raised by your code (your line is shown, not its message)"
    return {
        "step": step,
        "rank": rank,
        "error": text,
        "where": student_frame(exc, student_file),
        "hint": hint,
        "lost_peer": bool(LOST_PEER.search(text)),
    }


class Steps:
    """Run the student's steps until one raises: `with steps.at(index):` around each, then
    `steps.agree(index)` before the harness's own collectives; after the first failure,
    `steps.failed` holds its record and the harness stops (`steps.going`).
    `hint(exc, step, where)`: the lab's own reading of the error (`where`: the student's
    frame, or None; zerobook.labs.hints)."""

    def __init__(self, rank: int, student_file: str, hint=None):
        self.rank, self.student_file, self.hint = rank, student_file, hint
        self.failed: dict | None = None
        self.store = None  # run_store(), once asked
        self.alike = False  # every rank failed, each of its own error (agree)

    @property
    def going(self) -> bool:
        return self.failed is None

    def at(self, step):
        return _At(self, step)

    def agree(self, step) -> bool:
        """Whether every rank finished `step` (each says so in the run's store, not by a
        collective, which a peer that failed would never join); a rank that did, whose
        peer failed, stops too, naming the peer. Call it on every rank after each step.
        `alike`: every rank failed of its own error (none lost a peer): the ranks are
        where one another expects, and may go on to something else."""
        from zerobook.launcher.dist import collective_timeout

        if self.store is None:
            self.store = run_store()
        if self.store is None:  # one process: nobody to agree with
            return self.going
        store, world = self.store, int(os.environ["WORLD_SIZE"])
        said = "ok" if self.going else self.failed["error"][:200]
        store.set(f"zerobook/step/{step}/{self.rank}", said)
        keys = [f"zerobook/step/{step}/{r}" for r in range(world)]
        try:
            store.wait(keys, collective_timeout())
        except Exception:  # a peer died before it could say: it failed
            pass
        texts = [store.get(k).decode() if store.check([k]) else "" for k in keys]
        self.alike = all(t and t != "ok" and not LOST_PEER.search(t) for t in texts)
        if self.going:
            for peer, key in enumerate(keys):
                if peer != self.rank and store.check([key]):
                    text = store.get(key).decode()
                    if text != "ok":
                        self.failed = peer_failed(step, self.rank, peer, text)
                        break
            else:
                missing = [r for r, k in enumerate(keys) if not store.check([k])]
                if missing:
                    self.failed = peer_failed(step, self.rank, missing[0], "no answer")
        return self.going


def run_store():
    """The run's key-value store, as a new client of torchrun's (MASTER_ADDR:MASTER_PORT),
    its keys under this attempt's prefix: what ranks tell each other without a collective
    (zerobook.labs.crash.Steps.agree). None in a process of one rank."""
    import torch.distributed as dist

    from zerobook.launcher.dist import collective_timeout

    if "MASTER_PORT" not in os.environ:
        return None
    store = dist.TCPStore(
        os.environ.get("MASTER_ADDR", "localhost"),
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=collective_timeout(),
    )
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"zerobook/{attempt}/", store)


def peer_failed(step, rank: int, peer: int, text: str) -> dict:
    """A rank's record when it finished `step` but its peer did not."""
    when = f"at step {step}" if isinstance(step, int) else f"in {step}"
    return {
        "step": step,
        "rank": rank,
        "error": f"rank {peer} failed {when} ({text})",
        "where": None,
        "hint": "",
        "lost_peer": True,
    }


class _At:
    def __init__(self, steps: Steps, step):
        self.steps, self.step = steps, step

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False  # KeyboardInterrupt, SystemExit: not the student's step
        from zerobook.trust.report_guard import TamperError
        from zerobook.trust.restricted import PolicyViolation

        if isinstance(exc, (PolicyViolation, TamperError)):
            return False  # beyond the lab's rules, tampering: the run scores 0
        steps = self.steps
        steps.failed = failure(exc, self.step, steps.rank, steps.student_file)
        if steps.hint:
            steps.failed["hint"] = steps.hint(exc, self.step, steps.failed["where"])
        return True


def first_failed(failed: list[dict]) -> dict:
    """Of failure records, the one that came first: a rank's own (not one that lost its
    peer), the lowest such rank."""
    return min(failed, key=lambda f: (f["lost_peer"], f["rank"]))


def describe(failed: dict) -> str:
    """One failure in words: where, the student's line, the error, the hint."""
    step = failed["step"]
    when = f"at step {step}" if isinstance(step, int) else f"in {step}"
    return f"the run failed {when}, rank {failed['rank']}: {said(failed)}"


def said(failed: dict) -> str:
    """A failure's line of the student's (file, line, function, source), its error and
    its hint."""
    where, text = failed.get("where"), ""
    if where:
        text = (
            f"{where['file']}, line {where['line']}, in {where['function']}: "
            f"`{where['source']}`: "
        )
    text += failed["error"]
    return text + (f"\n  likely: {failed['hint']}" if failed.get("hint") else "")
