"""Lab 0 and the launching chapter, run as a macOS student runs them: every rank a fresh process
(ZEROBOOK_START=fresh, zerobook.launcher.start_method), from a folder outside the course's clone. Each
cell must run without an error, and the ranks' lines must reach the notebook tagged.
Lab 0 runs in make test; the launching chapter (its runs are test_launch_fresh's: four ranks
that report, one that raises) in make test-grading, which CI runs too."""

import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from colab_like import NOTEBOOKS  # Lab 0, the launching chapter, what they show
from conftest import ROOT
from zerobook.launcher import start_method

pytestmark = pytest.mark.launch


@pytest.mark.parametrize(
    "notebook",
    [
        pytest.param(n, marks=[pytest.mark.slow] if "chapters/" in n else [])
        for n in NOTEBOOKS
    ],
)
def test_the_notebook_runs_with_fresh_ranks(notebook, tmp_path, monkeypatch):
    monkeypatch.setenv(
        start_method.START_ENV, start_method.FRESH
    )  # the kernel inherits it
    path = tmp_path / (ROOT / notebook).name
    shutil.copy(ROOT / notebook, path)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=300, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    shown = "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )
    assert all(line in shown for line in NOTEBOOKS[notebook]), shown[:2000]
