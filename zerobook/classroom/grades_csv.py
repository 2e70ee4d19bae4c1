"""grades.csv, what the instructor exports: one row per student and lab of the gradebook.

`exporter` writes it with nbgrader's CSV exporter (what `nbgrader export` runs) in the grader's
own process, imported before any submission is graded: a grading environment that breaks
meanwhile cannot stop it. Then `zero_rows` gives a submission that could not be graded its 0,
`left_out` takes out the row of one that grading failed on the course's side
(zerobook.classroom.grader_errors) and `awaiting_column` names the answers still awaiting a
hand-grade.
"""

from __future__ import annotations

import csv
from pathlib import Path

from zerobook.classroom.feedback import AWAITING, awaiting_manual

FIELDS = ["assignment", "student_id", "score", "max_score"]  # a file with no rows yet


def exporter():
    """export(root, scores): the course's gradebook written to `scores` as nbgrader exports
    it; nbgrader imported now."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    def export(root: Path, scores: Path) -> None:
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
            CsvExportPlugin(to=str(scores)).export(gradebook)

    return export


def rewrite(scores: Path, change) -> None:
    """grades.csv with its rows (dicts) replaced by change(rows); a new key is a new column."""
    rows, fields = [], list(FIELDS)
    if scores.exists():
        with scores.open(newline="") as f:
            reader = csv.DictReader(f)
            rows, fields = list(reader), list(reader.fieldnames or FIELDS)
    rows = change(rows)
    fields = list(dict.fromkeys([*fields, *(key for row in rows for key in row)]))
    with scores.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)


def zero_rows(scores: Path, failed: list[tuple[str, str]]) -> None:
    """grades.csv: score 0 for each (student, lab) that could not be graded, present or not."""
    failed_keys = {(lab, student) for student, lab in failed}

    def zeroed(rows: list[dict]) -> list[dict]:
        for row in rows:
            if (row["assignment"], row["student_id"]) in failed_keys:
                row["score"] = "0.0"
        have = {(r["assignment"], r["student_id"]) for r in rows}
        return rows + [
            {"assignment": lab, "student_id": student, "score": "0.0"}
            for lab, student in sorted(failed_keys - have)
        ]

    rewrite(scores, zeroed)


def left_out(scores: Path, not_graded: list[tuple[str, str]]) -> None:
    """grades.csv without the rows of the (student, lab) pairs that were not graded."""
    out = set(not_graded)
    rewrite(
        scores,
        lambda rows: [r for r in rows if (r["student_id"], r["assignment"]) not in out],
    )


def awaiting_column(scores: Path, root: Path, failed=()) -> None:
    """grades.csv with a column saying, for each row, which answers await a hand-grade (its score
    leaves them out until the instructor grades them); none for a (student, lab) in `failed`."""
    from nbgrader.api import Gradebook

    def labelled(rows: list[dict]) -> list[dict]:
        for row in rows:
            graded = (row["student_id"], row["assignment"]) not in set(failed)
            waiting = (
                awaiting_manual(gradebook, row["assignment"], row["student_id"])
                if graded
                else {}
            )
            row[AWAITING] = "; ".join(
                f"{gid} ({points:g} points)" for gid, points in waiting.items()
            )
        return rows

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        rewrite(scores, labelled)
