"""Scores a student cannot forge: every autograded test of a lab re-run, from the course's own
notebook (labs/LAB/LAB.ipynb, hidden tests included), in a fresh process that never runs the
student's code — the student's code runs only in sandboxes (zerobook.classroom.sandbox): the ranks each
part launches, and a function server for the functions written in the notebook itself, which the
tests call through proxies (arguments and results cross as JSON, exceptions by name).

    python -m zerobook.classroom.clean_score LABS LAB SUBMITTED.ipynb WORKDIR RESULT.json

WORKDIR (the student's code is written there; the sandboxes may write there) must be private to
this submission; RESULT.json (outside it): {grade_id: {"points", "score", "error"}} for every
autograded cell, or {"error": why} for a submission that is not a notebook.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import signal
import sys
import time
from pathlib import Path

from zerobook import grading
from zerobook.trust import untrusted
from zerobook.classroom import sandbox
from zerobook.classroom.function_server import FunctionServer
from zerobook.classroom.feedback import NOTEBOOK_BYTES

CELL_TIMEOUT_ENV = "ZEROBOOK_CELL_TIMEOUT"
MESSAGE_CHARS = (
    20_000  # of a test's failure message: the student reads it in the feedback
)
CELL_TIMEOUT_S = (
    600  # a graded cell unless the grader says (its launches stop themselves sooner)
)


# a course cell that launches the student's file only to show what it does (Lab 8's broken
# loops run before they are repaired: 3 launches, half its clean run); its names read by no
# later cell (tests/test_labs.py)
NOT_GRADED = "not-in-grading"


def nbgrader_meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def cells_of(notebook: dict) -> list[tuple[str, dict, str]]:
    """(kind, nbgrader metadata, source) of each code cell: "test" (autograded: grade, no
    solution), "rank_script", "solution" (a student's functions), "manual" (graded by hand),
    "setup" (the course's own code), or "shown" (the course's cell tagged NOT_GRADED, which
    only shows the student what their file does: the clean run leaves it out)."""
    out = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        meta, source = nbgrader_meta(cell), "".join(cell["source"])
        if meta.get("grade") and not meta.get("solution"):
            kind = "test"
        elif meta.get("grade_id") == "rank_script":
            kind = "rank_script"
        elif meta.get("solution"):
            kind = "manual" if meta.get("grade") else "solution"
        else:
            tags = cell.get("metadata", {}).get("tags", [])
            kind = "shown" if NOT_GRADED in tags else "setup"
        out.append((kind, meta, source))
    return out


def student_sources(submitted: dict) -> dict[str, str]:
    """grade_id -> source of each cell the student writes (solutions and the rank script)."""
    return {
        meta["grade_id"]: source
        for kind, meta, source in cells_of(submitted)
        if kind in ("solution", "rank_script") and "grade_id" in meta
    }


def write_rank_script(source: str, workdir: Path) -> None:
    """The rank script cell's `%%writefile NAME` body, written to WORKDIR/NAME (a bare name only),
    byte for byte as the cell writes it;
    a new file: never through a link the function server, which may write WORKDIR, left there."""
    first, _, body = source.partition("\n")
    parts = first.split()
    if (
        len(parts) == 2
        and parts[0] == "%%writefile"
        and "/" not in parts[1]
        and not parts[1].startswith(".")
    ):
        untrusted.write_fresh(
            workdir / parts[1], body if body.endswith("\n") else body + "\n"
        )  # as IPython writes it


def defined_functions(source: str) -> list[str]:
    """Top-level function names a cell defines (nothing, if it does not parse)."""
    try:
        return [
            n.name
            for n in ast.parse(source).body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
    except SyntaxError:
        return []


def run_cell(source: str, namespace: dict, printed=None) -> str | None:
    """Execute one trusted cell; None if it passed, else its error (at most MESSAGE_CHARS).
    What the cell prints goes to `printed` (a file), if given: the test's own words, which the
    feedback shows (the ranks' own lines are not echoed while grading: zerobook.grading)."""
    limit = int(float(os.environ.get(CELL_TIMEOUT_ENV, CELL_TIMEOUT_S)))

    def expired(*_):
        raise TimeoutError(f"the cell ran longer than {limit} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    try:
        with contextlib.redirect_stdout(printed or sys.stdout):
            exec(compile(source, "test", "exec"), namespace)
        return None
    except BaseException as exc:  # noqa: BLE001 - every failure scores 0 and says why
        kind = type(exc).__name__
        return (f"{kind}: {exc}" if str(exc) else kind)[:MESSAGE_CHARS]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def one_line(message: str, limit: int = 500) -> str:
    """A message's first line and, if it has more, its last (a launch error's last
    line is what its ranks or the sandbox said last): at most `limit` characters."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    text = lines[0] if len(lines) < 2 else f"{lines[0]} {lines[-1]}"
    half = limit // 2
    return text if len(text) <= limit else f"{text[:half]} ... {text[-half:]}"


def score(labs: Path, lab: str, submitted_path: Path, workdir: Path) -> dict:
    """Every autograded cell of `lab`, run from the course's notebook against this submission."""
    try:
        submitted = untrusted.read_json(submitted_path, NOTEBOOK_BYTES)
        theirs = student_sources(submitted)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return {
            "error": f"the submission is not a notebook ({type(exc).__name__}: {exc})"[
                :500
            ]
        }
    source = json.loads((Path(labs) / lab / f"{lab}.ipynb").read_text())
    os.chdir(workdir)
    grading.sandbox_ranks(
        sandbox.RankSandbox([workdir])
    )  # the ranks see only this folder
    namespace, results, server = {"__name__": "__main__"}, {}, None
    try:
        for kind, meta, code in cells_of(source):
            if kind == "setup":
                run_cell(code, namespace)
            elif kind == "rank_script":
                try:
                    write_rank_script(theirs.get("rank_script", ""), workdir)
                except OSError as exc:  # untrusted.UntrustedFile: replaced meanwhile
                    return {"error": f"the rank script could not be written: {exc}"}
            elif kind == "solution":
                server = server or FunctionServer(
                    "\n".join(
                        theirs[m.get("grade_id")]
                        for k, m, _ in cells_of(source)
                        if k == "solution" and m.get("grade_id") in theirs
                    ),
                    workdir,
                    lab,
                )
                # the functions the course's cell defines, no other name: a student's
                # `def range(...)` must not replace a builtin for the tests
                for name in defined_functions(code):
                    namespace[name] = lambda *a, _n=name, **k: server.call(_n, a, k)
            elif kind == "test":
                start, printed = time.monotonic(), io.StringIO()
                error = run_cell(code, namespace, printed)
                points = float(meta.get("points", 0))
                results[meta["grade_id"]] = {
                    "points": points,
                    "score": 0.0 if error else points,
                    "error": one_line(error) if error else None,
                    "message": error,  # whole: the feedback shows it (feedback.verdict)
                    "output": printed.getvalue()[:MESSAGE_CHARS],  # and what it printed
                    "seconds": time.monotonic() - start,
                    "launches": code.count("run_part("),
                }
    finally:
        if server:
            server.close()
    return results


def main(argv: list[str]) -> None:
    labs, lab, submitted, workdir, result = argv
    result = Path(result).resolve()  # before score() moves into the workdir
    result.write_text(
        json.dumps(
            score(Path(labs), lab, Path(submitted).resolve(), Path(workdir).resolve())
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
