"""The course as a Colab student gets it: `make test-colab` (CI runs it after make test).

    python tests/colab_like.py [--torch 2.14.1] [--venv DIR] [--keep]

A fresh virtual environment that has torch already, at another version than the course's pin
(Colab ships its own: the newest other release the package index offers that the course runs
on), and nothing of the course; Lab 0 and the launching chapter copied to a folder outside the
clone and executed there by a Jupyter kernel of that environment, each with the first cell "How
to use this course" gives for Colab (zerobook/assets/colab_first_cell.py) put before its own: it
clones the course (this clone's last commit) and installs it with pip. It passes when every cell
runs and the ranks' tagged lines reach the notebook.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINNED = "2.13.0"  # the Makefile's
# the newest release this machine's index offers besides the pin: the doctor's second tested
OTHER_TORCH = "2.14.1"
NOTEBOOKS = {  # a notebook, and lines its ranks print (tagged by the launcher)
    "labs/setup_check/setup_check.ipynb": ["[rank0] [zerobook] backend=gloo"],
    "chapters/launching.ipynb": [
        f"[rank{r}] contributed {r + 1}, all" for r in range(4)
    ],
}
RUNNER = """
import sys, nbformat, torch
from nbclient import NotebookClient
print("torch", torch.__version__)
path, first_cell, *expected = sys.argv[1:]
nb = nbformat.read(path, as_version=4)
nb.cells.insert(0, nbformat.v4.new_code_cell(first_cell))
NotebookClient(nb, timeout=600, kernel_name="python3").execute(cwd=str(__import__("pathlib").Path(path).parent))
shown = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
missing = [line for line in expected if line not in shown]
assert not missing, f"not shown: {missing}"
print("ran every cell of", path)
"""


def first_cell(repository: str) -> str:
    """The Colab cell "How to use this course" shows and each lab's student version starts with
    (zerobook/assets/colab_first_cell.py), cloning `repository` instead of the published one."""
    cell = (ROOT / "zerobook" / "assets" / "colab_first_cell.py").read_text()
    assert "REPOSITORY = " in cell, cell
    return re.sub(r'REPOSITORY = "[^"]*"', f"REPOSITORY = {repository!r}", cell)


def run(argv: list[str], **kw) -> None:
    shown = [a if len(a) < 200 else "<code>" for a in argv]
    print("$", " ".join(shown), flush=True)
    subprocess.run(argv, check=True, **kw)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python tests/colab_like.py")
    parser.add_argument("--torch", default=OTHER_TORCH)
    parser.add_argument("--venv", type=Path, default=ROOT / "_build" / "colab-venv")
    parser.add_argument(
        "--keep", action="store_true", help="reuse the environment if it is there"
    )
    args = parser.parse_args()
    if args.torch == PINNED:
        sys.exit(f"--torch {PINNED} is the pin: a Colab-like run needs another version")
    start = time.monotonic()
    python = args.venv / "bin" / "python"
    colab_has = [f"torch=={args.torch}", "ipykernel", "nbclient"]  # what a runtime has
    if not (args.keep and python.exists()):
        shutil.rmtree(args.venv, ignore_errors=True)
        run([sys.executable, "-m", "venv", str(args.venv)])
        run([str(python), "-m", "pip", "install", "--quiet", *colab_has])
    else:  # the course a last run installed (from a clone since removed) goes
        run([str(python), "-m", "pip", "uninstall", "--quiet", "--yes", "zerobook"])
    with tempfile.TemporaryDirectory(prefix="colab-like-") as folder:  # not the clone
        cell = first_cell(f"file://{ROOT}")
        for notebook, expected in NOTEBOOKS.items():
            copy = Path(folder) / Path(notebook).name
            shutil.copy(ROOT / notebook, copy)
            run([str(python), "-c", RUNNER, str(copy), cell, *expected], cwd=folder)
    print(
        f"Colab-like run passed: torch {args.torch}, {time.monotonic() - start:.0f} s in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
