"""The first cell of each lab's student version: on Colab, or any Python without the course, it
clones the course and installs it; where the course is installed (the course's environment, the
grader's sandbox) it does nothing. Its text is zerobook/assets/colab_first_cell.py, which "How to
use this course" shows too, with REPOSITORY set to _config.yml's `repository.url`, the one place
the course's address is named. Not published (the url empty, as shipped), REPOSITORY stays empty
and the cell, where it would install, stops with a sentence saying to set it.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

CELL_ID = "colab-first-cell"  # the cell's id in a student version
REPOSITORY_LINE = re.compile(r'^REPOSITORY = "[^"\n]*"$', re.M)


def course_config() -> Path | None:
    """The course's _config.yml: in the folder the classroom runs from, else in the clone the
    package was imported from (so a release made from any folder names the same repository)."""
    here = Path("_config.yml")
    clone = Path(__file__).resolve().parents[2] / "_config.yml"
    return next((p for p in (here, clone) if p.is_file()), None)


def published_repository(config: Path | None = None) -> str:
    """_config.yml's repository.url, or "" (not published, or no _config.yml found)."""
    config = config or course_config()
    if config is None or not config.is_file():
        return ""
    found = re.search(
        r'^repository:\n(?:\s+#.*\n)*\s+url:\s*"?([^"#\s]*)', config.read_text(), re.M
    )
    return found.group(1) if found else ""


def cell_source(repository: str = "") -> str:
    """The cell's text, pointing at `repository` when given."""
    text = (
        resources.files("zerobook").joinpath("assets/colab_first_cell.py").read_text()
    )
    if repository:
        text = REPOSITORY_LINE.sub(f'REPOSITORY = "{repository}"', text)
    return text.rstrip("\n")


def is_course_cell(text: str) -> bool:
    """`text` is the Colab cell as the course wrote it (whatever repository it names)."""
    blank = lambda t: REPOSITORY_LINE.sub('REPOSITORY = ""', t.rstrip("\n"))  # noqa: E731
    return blank(text) == blank(cell_source())


def put_first(notebook, repository: str = "") -> None:
    """Make the cell `notebook`'s first code cell (right after its title, where it has one),
    once: a cell of no grade (no nbgrader metadata), which nbgrader's autograde leaves as the
    student ran it."""
    import nbformat

    notebook.cells = [c for c in notebook.cells if c.get("id") != CELL_ID]
    cell = nbformat.v4.new_code_cell(cell_source(repository))
    cell["id"] = CELL_ID
    first = notebook.cells[0] if notebook.cells else None
    titled = (
        first is not None
        and first.cell_type == "markdown"
        and "\n# " in f"\n{first.source}"
    )
    notebook.cells.insert(1 if titled else 0, cell)
