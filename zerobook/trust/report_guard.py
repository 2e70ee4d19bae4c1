"""A lab harness's reports, guarded against the student's file it imports (same process).

    guard(harness_globals)   # harness.load_student calls it just before importing the student
    check(caller_frame)      # zerobook.launcher.dist.report calls it: TamperError if the report is not the harness's
    verify_written(path)     # zerobook.launcher.rank_entry, after the harness returned: the file is what report wrote

Once guarded, a report counts only if it comes from one of the harness module's own functions as
they were before the student's file was imported, with the harness's globals and `zb.report`
unchanged, and the report file on disk is exactly what `report` wrote. That defeats a student
file that wraps or replaces `zb.report`, patches the harness's helpers, or writes the report file
itself. It cannot stop code that rewrites this module's memory: the student's file runs in the
same interpreter. The grader's clean run (zerobook.classroom.clean_score) and the sandbox bound what such
code can reach; what it tried is in the failure it leaves.
"""

from __future__ import annotations

import types

_state: dict = {"codes": None, "globals": None, "written": {}}


class TamperError(RuntimeError):
    """The student's code replaced what the harness reports with (named in the message)."""


def guard(harness_globals: dict, owners: tuple, also=None) -> None:
    """Trust the functions `harness_globals` defines now, and remember its globals' values
    and the `report` each module of `owners` holds (zerobook and zerobook.launcher.dist); `also`: a
    check of its own that every report runs first (raising TamperError)."""
    functions = [
        v
        for v in harness_globals.values()
        if isinstance(v, types.FunctionType)
        and v.__module__ == harness_globals.get("__name__")
    ]
    _state["codes"] = {f.__code__ for f in functions}
    _state["globals"] = (harness_globals, dict(harness_globals))
    _state["report"] = (owners, owners[-1].report)
    _state["also"] = also


def check(caller) -> None:
    """Raise TamperError unless the guarded harness itself is reporting (no-op when unguarded)."""
    if _state["codes"] is None:
        return
    if _state["also"] is not None:
        _state["also"]()
    owners, report = _state["report"]
    if any(owner.report is not report for owner in owners):
        raise TamperError("tampering: zb.report was replaced by the student's code")
    module, snapshot = _state["globals"]
    changed = sorted(k for k, v in snapshot.items() if module.get(k) is not v)
    if changed:
        raise TamperError(
            f"tampering: the student's code replaced the harness's {', '.join(changed)}"
        )
    if caller.f_code not in _state["codes"]:
        raise TamperError(
            f"tampering: zb.report was called from {caller.f_code.co_name} "
            f"({caller.f_code.co_filename}), not by the lab's harness"
        )


def written(path, text: str) -> None:
    """Remember what report wrote to `path` (verify_written compares)."""
    _state["written"][str(path)] = text


def verify_written(folder, rank: int) -> None:
    """Raise TamperError if this rank's report file differs from what report wrote (guarded only)."""
    from pathlib import Path

    if _state["codes"] is None:
        return
    path = Path(folder) / f"rank{rank}.json"
    on_disk = path.read_text() if path.exists() else None
    if on_disk != _state["written"].get(str(path)):
        raise TamperError(
            "tampering: the report file was written by something other than zb.report"
        )
