"""pytest plugin (`-p tests.nbcache`): nbval executes each notebook once, and the book reuses it.

nbval runs a notebook cell by cell in one kernel and fails the cell that raises. When every code
cell of a notebook has passed, this plugin stores the notebook with the outputs nbval received
into the book's jupyter-cache (`_build/.jupyter_cache`, myst-nb's default). `jupyter-book build`
with `execute_notebooks: cache` (see _config.yml) then finds a record whose code matches and shows
those outputs instead of executing the notebook a second time. A notebook with a failed cell is
not stored, so the build executes it and fails on it (-W) too.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"
TRIES = 5  # two xdist workers may write the cache's SQLite database at once


def is_notebook_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and hasattr(item.parent, "nb")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when != "call" or not is_notebook_cell(item):
        return
    report = outcome.get_result()
    notebook = item.parent
    state = notebook.__dict__.setdefault(
        "_zerobook_cache", {"failed": False, "count": 0, "start": time.monotonic()}
    )
    state["failed"] |= report.failed
    state["count"] += 1
    item.cell.outputs = shown_outputs(item.cell.source, item.test_outputs or [])
    item.cell.execution_count = state["count"]
    code_cells = sum(c.cell_type == "code" for c in notebook.nb.cells)
    path = Path(str(notebook.path))
    # the book's pages only: not the solved labs written to _build (tests/solved_labs.py)
    if (
        state["count"] == code_cells
        and not state["failed"]
        and CACHE.parent not in path.parents
    ):
        store(notebook.nb, path, time.monotonic() - state["start"])


def shown_outputs(source: str, outputs: list) -> list:
    """What a notebook would show: nbval executes with store_history=False, so IPython cannot see
    a trailing `;` and displays the cell's value anyway; drop it as IPython would."""
    from IPython.core.displayhook import DisplayHook

    if DisplayHook.semicolon_at_end_of_expression(source):
        return [o for o in outputs if o.output_type != "execute_result"]
    return list(outputs)


def store(nb, path: Path, seconds: float) -> None:
    """Cache the executed notebook as myst-nb would after executing it."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    for attempt in range(TRIES):
        try:
            get_cache(str(CACHE)).cache_notebook_bundle(
                CacheBundleIn(nb, str(path), data={"execution_seconds": seconds}),
                check_validity=False,
                overwrite=True,
            )
            return
        except Exception:  # noqa: BLE001  (sqlite "database is locked" surfaces as several types)
            if attempt == TRIES - 1:
                raise
            time.sleep(1 + attempt)
