"""The course's saved measurements (benchmarks/results/), found through the package, so that a
chapter reads them from whatever folder its notebook runs in (Colab's /content, a copy
elsewhere): `saved.result("perfmodel_cpu_gloo.json")`.

They are files of the course's clone, beside the package (an editable install, `pip install -e`,
keeps them there), not inside it: `make gpu-check` and the benchmarks write them.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def result(name: str) -> Path:
    """The path of benchmarks/results/`name` (it may not exist: a chapter says what to run)."""
    return RESULTS / name
