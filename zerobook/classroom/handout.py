"""A lab's page in the book reads as a handout, not as an unexecuted notebook: its own text (what
you build, what each test checks), the file you write as the student version hands it out (its
stubs), a table of the graded tests and their points read from nbgrader's metadata, and how to
start. The cells that only run (set-up, the Colab cell, the tests' code, answer boxes) are
removed from the page, not from the notebook its download menu offers.
"""

from __future__ import annotations

import re

HANDOUT_ID = "handout"
REMOVED = "remove-cell"


def graded_rows(notebook) -> list[tuple[str, int, bool]]:
    """(the heading a graded cell sits under, its points, graded by hand), in order."""
    rows, heading = [], ""
    for cell in notebook.cells:
        found = re.findall(r"^#{2,3} (.+)$", cell.source, re.M)
        heading = found[-1] if found else heading
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and meta.get("points"):
            by_hand = cell.cell_type == "markdown" or meta.get("task", False)
            rows.append((heading, meta["points"], by_hand))
    return rows


def handout_text(notebook) -> str:
    """The handout's cell: the graded tests and their points, and how to start."""
    rows = graded_rows(notebook)
    lines = ["| graded | points |", "| --- | --- |"]
    for heading, points, by_hand in rows:
        name = re.sub(
            r"\s*\((\d+ points?|not graded)\)$", "", re.sub(r"^Tests?: ", "", heading)
        )
        name = (
            f"your written answer ({name[0].lower()}{name[1:]}), by hand"
            if by_hand
            else name
        )
        lines.append(f"| {name} | {points} |")
    lines.append(f"| **total** | **{sum(p for _, p, _ in rows)}** |")
    return "\n".join(
        [
            "## This lab at a glance",
            "",
            "You write the file below, where it says `YOUR CODE HERE`; the tests run it on"
            " several processes and grade what each run measured.",
            "",
            *lines,
            "",
            "**To start.** Take this notebook from the page's download menu (or your"
            " instructor, or `make release`), open it in JupyterLab and run it top to bottom: the"
            " cells after yours check your code and say what is wrong. On Colab its first cell"
            " installs the course. Your instructor grades the same tests, on more cases.",
        ]
    )


def as_handout(notebook) -> None:
    """The book's page of a student version: the handout after the title; the cells that only
    run, and the boxes for written answers, removed from the page."""
    import nbformat

    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        writes = cell.cell_type == "code" and meta.get("solution")
        answer_box = cell.cell_type == "markdown" and meta.get("solution")
        if (cell.cell_type == "code" and not writes) or answer_box:
            tags = cell.metadata.setdefault("tags", [])
            if REMOVED not in tags:
                tags.append(REMOVED)
    cell = nbformat.v4.new_markdown_cell(handout_text(notebook))
    cell["id"] = HANDOUT_ID
    notebook.cells.insert(1, cell)
