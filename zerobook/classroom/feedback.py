"""What a graded submission leaves: its scores in the gradebook, its feedback, the instructor's flags.

`record` writes the clean run's scores (zerobook.classroom.clean_score) as the autograded ones;
`awaiting_manual` and `label_awaiting` say which answers wait for the instructor's hand-grade
(nbgrader shows them as 0), on the feedback page; `scrub` builds the notebook the feedback is
made from: the hidden tests' source left out, each test cell's outputs the clean run's (what the
test printed, its error), every other cell's as the student submitted them, each output, cell and the notebook's metadata rebuilt
from what the page renders (zerobook.classroom.shown), capped, each path as the course names it
(zerobook.classroom.relative_paths); `tampered_tests` names test cells a student edited;
`failure_page` gives a submission that could not be graded its reason (grades.csv its 0:
zerobook.classroom.grades_csv).
"""

from __future__ import annotations

import json
import os
import re
from html import escape
from pathlib import Path

from zerobook.trust import untrusted
from zerobook.classroom import shown
from zerobook.classroom.relative_paths import output_relative, relative_paths

# the label of a score the instructor has not given yet
AWAITING = "awaiting manual grading"
MAX_OUTPUT_CHARS = 20_000  # one output of the feedback; a flood is cut, saying so
# a submitted or autograded notebook, outputs included, at most
NOTEBOOK_BYTES = 64 * 2**20
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)
HIDDEN_LINES = re.compile(
    r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.S
)  # as nbgrader releases


def test_cells(notebook: dict) -> dict[str, dict]:
    """grade_id -> cell, for the autograded test cells (grade, not solution)."""
    out = {}
    for cell in notebook["cells"]:
        meta = shown.cell_metadata(cell.get("metadata")).get("nbgrader", {})
        if (
            cell.get("cell_type") == "code"
            and meta.get("grade")
            and not meta.get("solution")
        ):
            out[meta.get("grade_id")] = cell
    return out


def record(root: Path, lab: str, student: str, clean: dict) -> None:
    """Each autograded test's score in the gradebook is the clean run's (nbgrader's autograde
    does not execute the notebook: zerobook.classroom.grade); the answers graded by hand keep
    the instructor's scores."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        for grade in gradebook.find_submission_notebook(lab, lab, student).grades:
            result = clean.get(grade.name)
            if result is None:  # an answer graded by hand
                continue
            grade.auto_score, grade.manual_score = result["score"], None
        gradebook.db.commit()


def tampered_tests(root: Path, lab: str, notebook_path: Path) -> list[str]:
    """Test cells whose source differs from the released notebook's (the edit changes nothing:
    tests run from the course's notebook, but the instructor should know)."""
    released = test_cells(
        json.loads((root / "release" / lab / f"{lab}.ipynb").read_text())
    )
    theirs = test_cells(untrusted.read_json(notebook_path, NOTEBOOK_BYTES))
    shown = lambda cell: HIDDEN_LINES.sub(
        "", "".join(cell.get("source", ""))
    ).strip()  # as released
    changed = [
        gid
        for gid, cell in released.items()
        if gid not in theirs or shown(theirs[gid]) != shown(cell)
    ]
    return [
        f"test cell {gid} was edited or removed in the submission" for gid in changed
    ]


def scrub(
    autograded: Path, clean: dict | None = None, submitted: Path | None = None
) -> None:
    """The notebook the feedback is made from, built by the trusted side: each cell's source
    (the hidden tests' replaced by a note); each test cell's outputs from the clean run alone
    (`clean`: grade_id -> its result: what the test printed, then its error); every other
    cell's outputs as the student submitted them (`submitted`; None: the notebook at
    `autograded` is the submission), never outputs produced once the hidden tests were in
    (nbgrader's autograde does not execute the notebook; an execution that did would let a
    display updated after them, or a hook, print their source). Every output rebuilt from what the page renders (zerobook.classroom.shown),
    capped; read and written as untrusted (zerobook.trust.untrusted: a regular file, never
    a link)."""
    if not os.path.lexists(autograded):
        return
    notebook = untrusted.read_json(autograded, NOTEBOOK_BYTES)
    given = notebook
    if submitted is not None:
        given = untrusted.read_json(submitted, NOTEBOOK_BYTES)
    cells = given.get("cells") if isinstance(given, dict) else None
    theirs = outputs_as_submitted(notebook["cells"], cells)
    tests, mine = test_cells(notebook), (autograded.parent,)  # their files: by name
    notebook["metadata"] = dict(shown.NOTEBOOK_METADATA)  # none of theirs (widgets)
    for cell, outputs in zip(notebook["cells"], theirs):
        cell["metadata"] = shown.cell_metadata(cell.get("metadata"))
        cell["source"] = shown.text(cell.get("source")) or ""
        cell.pop("attachments", None)
        if cell["cell_type"] != "code":
            continue
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if any(cell is c for c in tests.values()):
            note = "### hidden tests: not shown (their failures are) ###"
            cell["source"] = HIDDEN.sub(note, cell["source"])
            outputs = verdict((clean or {}).get(gid))
        cell["outputs"] = [
            cap(output_relative(shown.output(o), mine))
            for o in (outputs if isinstance(outputs, list) else [])
        ]
    untrusted.write_fresh(autograded, json.dumps(notebook, indent=1))


def outputs_as_submitted(cells: list, given) -> list:
    """For each of `cells` (nbgrader's copy of a submission), the outputs of the same cell
    in the submitted notebook's `given` cells: by cell id where both have one, else by
    position where the two have as many cells; none where no cell matches."""
    given = [c for c in given if isinstance(c, dict)] if isinstance(given, list) else []
    by_id = {c.get("id"): c for c in given if isinstance(c.get("id"), str)}
    same_length = len(given) == len(cells)
    out = []
    for k, cell in enumerate(cells):
        match = by_id.get(cell.get("id")) if isinstance(cell.get("id"), str) else None
        if match is None and same_length:
            match = given[k]
        out.append((match or {}).get("outputs", []))
    return out


def verdict(result: dict | None) -> list[dict]:
    """A test cell's outputs, from the clean run's result: what the test printed (the
    course's words, which name the mistake), then its error, if it failed."""
    out = []
    if result and isinstance(result.get("output"), str) and result["output"]:
        out.append(
            {"output_type": "stream", "name": "stdout", "text": result["output"]}
        )
    if not result or not result.get("error"):
        return out
    kind, _, message = str(result.get("message") or result["error"]).partition(": ")
    error = {"output_type": "error", "ename": kind, "evalue": message, "traceback": []}
    return out + [error]


def cap(output: dict) -> dict:
    """One output (as zerobook.classroom.shown builds it: its texts strings) with its text cut
    to MAX_OUTPUT_CHARS, saying how much was cut."""
    for key in ("text",):
        if key in output:
            text = (
                "".join(output[key]) if isinstance(output[key], list) else output[key]
            )
            if len(text) > MAX_OUTPUT_CHARS:
                output[key] = (
                    text[:MAX_OUTPUT_CHARS]
                    + f"\n[... {len(text) - MAX_OUTPUT_CHARS:,} more characters cut]\n"
                )
    data = output.get("data", {})
    for kind, value in list(data.items()):
        text = "".join(value) if isinstance(value, list) else value
        if isinstance(text, str) and len(text) > MAX_OUTPUT_CHARS * 10:
            data[kind] = (
                f"[an output of {len(text):,} characters was left out]"
                if kind.startswith("text")
                else ""
            )
            if not kind.startswith("text"):
                del data[kind]
    return output


def failure_page(root: Path, student: str, lab: str, reason: str) -> None:
    """A feedback page for a submission that could not be graded: why, and that it scored 0."""
    page = root / "feedback" / student / lab / f"{lab}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(
        f"<html><body><h1>{escape(lab)}: not graded</h1><p>Your submission could not be graded, "
        f"so it scores 0: {escape(relative_paths(reason)[:2_000])}</p><p>Fix it, run every cell from the top, save, "
        f"and submit again.</p></body></html>\n"
    )


def awaiting_manual(gradebook, lab: str, student: str) -> dict[str, float]:
    """grade_id -> points of each answer of the submission still waiting for a hand-grade."""
    from nbgrader.api import MissingEntry

    try:
        grades = gradebook.find_submission_notebook(lab, lab, student).grades
    except MissingEntry:
        return {}
    return {g.name: g.max_score for g in grades if g.needs_manual_grade}


def awaiting_in(root: Path, lab: str, student: str) -> dict[str, float]:
    """awaiting_manual, read from the course's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return awaiting_manual(gradebook, lab, student)


def label_awaiting(page: Path, awaiting: dict[str, float]) -> None:
    """The feedback page with each score still waiting for a hand-grade labelled so, in the list
    of parts, at the answer and in the total (nbgrader shows such a score as 0)."""
    if not awaiting or not page.exists():
        return
    html = page.read_text()
    for gid in map(re.escape, awaiting):
        html = re.sub(
            rf'(href="#{gid}">[^<]*</a> \(Score: [^)]*)\)', rf"\1, {AWAITING})", html
        )
        html = re.sub(
            rf'(<a name="{gid}"></a>.*?Score: [^<]*?)( <a href="#top">)',
            rf"\1 ({AWAITING})\2",
            html,
            count=1,
            flags=re.S,
        )
    points = f"{sum(awaiting.values()):g} point(s) {AWAITING}"
    page.write_text(
        re.sub(r"(<h4>[^<]*\(Score: [^)]*)\)", rf"\1; {points})", html, count=1)
    )


def summarize(outcomes: list, unchanged: int, scores: Path, root: Path) -> None:
    """What `grade` prints at the end: each submission's outcome, its flags and failure."""
    print(
        f"graded {len(outcomes)} submission(s); {unchanged} unchanged since last graded (--all regrades them)"
    )
    print(f"scores: {scores}\nfeedback: {root / 'feedback'}")
    for o in outcomes:
        used = ", ".join(f"{k} {v}" for k, v in o.peak.items())
        done = "not graded" if o.failure or o.grader_error else "graded"
        waiting = "".join(
            f"; {gid} ({points:g} points) {AWAITING}"
            for gid, points in o.awaiting.items()
        )
        print(
            f"{o.student} / {o.lab}: {done} in {o.seconds:.0f} s"
            + (f" (at most: {used})" if used else "")
            + waiting
        )
        for flag in o.flags:
            print(f"FLAGGED: {o.student} / {o.lab}: {flag}")
        if o.failure:
            print(f"NOT GRADED: {o.student} / {o.lab}: {o.failure}")
        if o.grader_error:  # zerobook.classroom.grader_errors: the course's side
            print(f"NOT GRADED: {o.student} / {o.lab}: grader error: {o.grader_error}")
