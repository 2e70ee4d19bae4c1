"""Each lab as a student opens it, solved: the released student version with the reference
solution filled in, run under nbval beside the instructor notebook (make test: every lab but the
capstone, written to _build/solved_labs by `python tests/solved_labs.py _build/solved_labs`;
make test-grading: the capstone's two, tests/test_capstone_notebooks.py).

The student version is what `release` hands out (zerobook.classroom.release.student_version:
solutions replaced by stubs, hidden tests out, the Colab cell first); each solution cell is then
given the instructor notebook's source, so the rank script it writes is the reference's, byte for
byte. A cell that raises there and not in the instructor notebook is a student's bug (a name
only a hidden test defined, a stale path in a cell the release kept).

As a pytest plugin (`-p tests.solved_labs`) it runs each lab launch once for both notebooks: the
kernel of every lab notebook gets a run cache shared by the session (zerobook.run_cache, its
WRITE_ENV=new: replay what is recorded, launch and record what is not), so whichever of the two
notebooks runs second replays the first one's launches, as a graded student's kernel replays the
clean run's. Every cell of both still runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNS_ENV = "ZEROBOOK_TEST_LAB_RUNS"  # the session's run cache, for every worker


def solved_version(labs: Path, lab: str):
    """Lab `lab`'s student version, each solution cell (code or written answer) holding the
    instructor notebook's source."""
    import nbformat

    from zerobook.classroom.release import student_version

    grade_id = lambda cell: cell.metadata.get("nbgrader", {}).get("grade_id")  # noqa: E731
    instructor = nbformat.read(Path(labs) / lab / f"{lab}.ipynb", as_version=4)
    reference = {grade_id(c): c.source for c in instructor.cells if grade_id(c)}
    notebook = student_version(labs, lab)
    solutions = [
        c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("solution")
    ]
    assert solutions, f"{lab}: the student version has no cell to solve"
    for cell in solutions:
        cell.source = reference[grade_id(cell)]
    return notebook


def write_solved(labs: Path, out: Path) -> list[Path]:
    """Every lab's solved student version as out/LAB/LAB.ipynb (the folder emptied first)."""
    import nbformat

    from zerobook.classroom.release import lab_names

    shutil.rmtree(out, ignore_errors=True)
    written = []
    for lab in lab_names(labs):
        written.append(out / lab / f"{lab}.ipynb")
        written[-1].parent.mkdir(parents=True)
        nbformat.write(solved_version(labs, lab), written[-1])
    return written


def is_lab_notebook(path: Path) -> bool:
    """labs/LAB/LAB.ipynb, or a solved one, _build/solved_labs/LAB/LAB.ipynb."""
    return path.stem == path.parent.name and path.parent.parent.name in (
        "labs",
        "solved_labs",
    )


def pytest_configure(config):
    """The controller makes the session's run cache; its workers inherit the variable."""
    if hasattr(config, "workerinput") or os.environ.get(RUNS_ENV):
        return
    config._zerobook_lab_runs = tempfile.mkdtemp(prefix="zerobook-lab-runs-")
    os.environ[RUNS_ENV] = config._zerobook_lab_runs


def pytest_unconfigure(config):
    folder = getattr(config, "_zerobook_lab_runs", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(RUNS_ENV, None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """A lab notebook's first cell starts its kernel here: with the run cache in its
    environment (this process's is as it was once the kernel has started)."""
    from zerobook import run_cache

    notebook = getattr(item, "parent", None)
    shared = os.environ.get(RUNS_ENV)
    if not (
        shared
        and type(item).__name__ == "IPyNbCell"
        and is_lab_notebook(Path(str(notebook.path)))
    ):
        yield
        return
    names = (run_cache.CACHE_ENV, run_cache.WRITE_ENV)
    before = {name: os.environ.get(name) for name in names}
    os.environ.update({run_cache.CACHE_ENV: shared, run_cache.WRITE_ENV: run_cache.NEW})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for path in write_solved(ROOT / "labs", Path(sys.argv[1])):
        print(path)
