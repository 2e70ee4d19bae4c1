"""How long the course takes, measured from its own files: a chapter's words of prose (code,
math, tables and directive options left out) read at 120 words a minute, and a lab's size as the
lines of code of its reference solution. "How to use this course" shows them
(`time_table`); tests/page_measures.py holds every chapter's prose to its limits with `prose`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

WORDS_PER_MINUTE = 120  # a careful pace for prose dense with ideas and numbers
WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d[\d,.]*\d|\d")
# The afternoon's path: the ideas, without the labs and the chapters beyond
READER_PATH = (
    "memory_accounting",
    "data_parallelism",
    "ring_allreduce",
    "zero1",
    "zero2",
    "zero3",
    "when_zero_pays",
)


def prose(source: str) -> str:
    """A Markdown cell's prose: code, math, comments, tables and directive options left out."""
    text = re.sub(r"```(?!\{).*?```", " ", source, flags=re.S)  # code blocks
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", " x ", text)  # inline math: one word
    lines = [
        line
        for line in text.splitlines()
        if not re.match(r"\s*(\||:[\w-]+:|```|:::)", line)  # tables, options, fences
    ]
    text = "\n".join(lines)
    text = re.sub(
        r"\{\w+(:\w+)?\}`([^`<]*)(<[^`]*>)?`", r"\2", text
    )  # roles: their text
    return re.sub(r"`[^`]*`", " x ", text)  # inline code: one word


def markdown_cells(path: Path) -> list[str]:
    cells = json.loads(Path(path).read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def prose_words(path: Path) -> int:
    """Words of prose of a chapter notebook."""
    return sum(len(WORD.findall(prose(text))) for text in markdown_cells(path))


def reading_minutes(path: Path) -> int:
    """A chapter's prose at WORDS_PER_MINUTE, to the nearest 5 minutes (at least 5)."""
    return max(5, 5 * round(prose_words(path) / WORDS_PER_MINUTE / 5))


def solution_lines(notebook: Path) -> int:
    """Lines of code between nbgrader's solution markers (comments and blank lines out)."""
    cells = json.loads(Path(notebook).read_text())["cells"]
    found = re.findall(
        r"### BEGIN SOLUTION\n(.*?)### END SOLUTION",
        "\n".join("".join(c["source"]) for c in cells),
        re.S,
    )
    return sum(
        1
        for block in found
        for line in block.splitlines()
        if line.strip() and not line.strip().startswith("#")
    )


def time_rows(root: Path) -> list[tuple[str, str, str]]:
    """(chapter, minutes of reading, the labs that follow it and their sizes), in book order."""
    from zerobook.figures.course_map import chapters, labs

    after = {}
    for lab in labs(root):
        size = solution_lines(root / "labs" / lab.folder / f"{lab.folder}.ipynb")
        after[lab.chapters[-1]] = f"{lab.title.split(' — ')[0]}: {size} lines"
    return [
        (
            f"{c.number}. {c.title}",
            str(reading_minutes(root / f"{c.page}.ipynb")),
            after.get(c.page, ""),
        )
        for c in chapters(root)
        if c.page.startswith("chapters/")
    ]


def reader_path(root: Path) -> tuple[str, int]:
    """The afternoon's chapters, by number ("3–8, 11"), and their minutes of reading."""
    from zerobook.figures.course_map import chapters

    numbers = [c.number for c in chapters(root) if c.page.split("/")[-1] in READER_PATH]
    runs, start = [], numbers[0]
    for a, b in zip(numbers, numbers[1:] + [None]):
        if b != a + 1:
            runs.append(f"{start}–{a}" if a != start else f"{a}")
            start = b
    minutes = sum(
        reading_minutes(root / "chapters" / f"{p}.ipynb") for p in READER_PATH
    )
    return "chapters " + ", ".join(runs), minutes


def time_table(root: Path):
    """The table "How to use" shows (an HTML table of the book's style)."""
    from zerobook.figures.widgets import html_table

    return html_table(
        ["chapter", "reading (min)", "then the lab (its solution)"], time_rows(root)
    )
