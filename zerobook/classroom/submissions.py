"""What was submitted, what of it can be graded, and what changed since it was last graded.

    submitted(root)                          # {lab: [student, ...]} from submitted/STUDENT/LAB
    submission_problem(root, lab, student)   # why it cannot be graded (a link, too big), or None
    to_grade(labs, root, wanted, everyone)   # [(lab, student, digest)] new or changed

A submission is read with lstat before anything opens it (zerobook.trust.untrusted): a link, a FIFO or a
device is refused by name. A grade depends on the submission's files, the course's notebook of the
lab and its hidden parameters (`digest`); grading_state.json keeps each one's digest, so a class is
graded again only where something changed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from zerobook.trust import untrusted
from zerobook.classroom.clean_run import hidden_env
from zerobook.classroom.release import release_lab

STATE = "grading_state.json"  # lab -> student -> digest of what was graded (submission + course notebook)
SUBMISSION_BYTES, SUBMISSION_FILES = 128 * 2**20, 1_000  # submitted/STUDENT/LAB at most


def submitted(root: Path) -> dict[str, list[str]]:
    """lab -> the students who submitted it (folders submitted/STUDENT/LAB, or links there:
    submission_problem refuses those)."""
    out: dict[str, list[str]] = {}
    for folder in sorted((root / "submitted").glob("*/*")):
        if folder.is_dir() or folder.is_symlink():
            out.setdefault(folder.name, []).append(folder.parent.name)
    return out


def submission_problem(root: Path, lab: str, student: str) -> str | None:
    """Why submitted/STUDENT/LAB cannot be graded, naming the path: anything in it but folders
    and regular files (a link, a FIFO, a device: nbgrader would follow it), or more than
    SUBMISSION_FILES files or SUBMISSION_BYTES; None if it can (lstat only: nothing is read)."""
    folder = root / "submitted" / student
    why = (
        f"{student} is a symbolic link"
        if folder.is_symlink()
        else untrusted.tree_problem(folder / lab, SUBMISSION_BYTES, SUBMISSION_FILES)
    )
    return why and (
        f"submit regular files only, at most {SUBMISSION_FILES:,} of them and "
        f"{SUBMISSION_BYTES // 2**20} MiB: {why}"
    )


def digest(labs: Path, root: Path, lab: str, student: str) -> str:
    """What a grade depends on: the submission's files, the course's notebook of the lab and
    its hidden parameters (a submission that cannot be graded: why, not its files)."""
    h = hashlib.sha256((labs / lab / f"{lab}.ipynb").read_bytes())
    h.update(json.dumps(hidden_env(labs, lab)).encode())
    why = submission_problem(root, lab, student)
    for path in [] if why else sorted((root / "submitted" / student / lab).rglob("*")):
        if path.is_file():
            h.update(
                str(path.relative_to(root)).encode()
                + untrusted.read_bytes(path, SUBMISSION_BYTES)
            )
    h.update((why or "").encode())
    return h.hexdigest()


def load_state(root: Path) -> dict:
    path = root / STATE
    return json.loads(path.read_text()) if path.exists() else {}


def to_grade(
    labs: Path, root: Path, wanted: dict, everyone: bool
) -> list[tuple[str, str, str]]:
    """(lab, student, digest) of each submission new or changed since it was last graded
    (everyone: all of them); nbgrader's gradebook learns each lab first."""
    state, todo = load_state(root), []
    for lab, students in sorted(wanted.items()):
        release_lab(labs, root, lab)
        for student in students:
            d = digest(labs, root, lab, student)
            if everyone or state.get(lab, {}).get(student) != d:
                todo.append((lab, student, d))
    return todo
