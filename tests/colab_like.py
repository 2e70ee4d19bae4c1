"""The course as a Colab student gets it: `make test-colab` (CI runs it after make test).

    python tests/colab_like.py [--torch 2.14.1] [--venv DIR] [--keep]

A fresh virtual environment that has torch already, at another version than the course's pin
(Colab ships its own: the newest other release the package index offers that the course runs
on), the course installed with `pip install` alone (not editable, no make, no .venv), and Lab 0
and the launching chapter executed from a folder outside the clone by a Jupyter kernel of that
environment. It passes when every cell runs and the ranks' tagged lines reach the notebook.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINNED = "2.13.0"  # the Makefile's
OTHER_TORCH = "2.14.1"  # the newest release this machine's index offers besides the pin
NOTEBOOKS = {  # a notebook, and lines its ranks print (tagged by the launcher)
    "labs/setup_check/setup_check.ipynb": ["[rank0] [zerobook] backend=gloo"],
    "chapters/launching.ipynb": [
        f"[rank{r}] contributed {r + 1}, all" for r in range(4)
    ],
}
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")
RUNNER = """
import sys, nbformat, torch, zerobook
from nbclient import NotebookClient
print("torch", torch.__version__, "zerobook from", zerobook.__file__)
path, *expected = sys.argv[1:]
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=600, kernel_name="python3").execute(cwd=str(__import__("pathlib").Path(path).parent))
shown = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
missing = [line for line in expected if line not in shown]
assert not missing, f"not shown: {missing}"
print("ran every cell of", path)
"""


def run(argv: list[str], **kw) -> None:
    shown = ["<the notebook runner>" if a == RUNNER else a for a in argv]
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
    if not (args.keep and python.exists()):
        shutil.rmtree(args.venv, ignore_errors=True)
        run([sys.executable, "-m", "venv", str(args.venv)])
        run([str(python), "-m", "pip", "install", "--quiet", f"torch=={args.torch}"])
    with tempfile.TemporaryDirectory(prefix="colab-like-") as folder:  # not the clone
        # the course as a package, built from a copy (setuptools leaves build/ where it builds)
        source = Path(folder) / "course"
        shutil.copytree(ROOT / "zerobook", source / "zerobook", ignore=IGNORED)
        shutil.copy(ROOT / "pyproject.toml", source)
        run([str(python), "-m", "pip", "install", "--quiet", str(source), "nbclient"])
        installed = time.monotonic() - start
        for notebook, expected in NOTEBOOKS.items():
            copy = Path(folder) / Path(notebook).name
            shutil.copy(ROOT / notebook, copy)
            run([str(python), "-c", RUNNER, str(copy), *expected], cwd=folder)
    print(f"Colab-like run passed: torch {args.torch}, installed in {installed:.0f} s, "
          f"{time.monotonic() - start:.0f} s in all")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
