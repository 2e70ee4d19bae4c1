"""The capstone's two notebooks under nbval, in full (make test-grading): the instructor's, its
hidden tests included, then the student's release with the reference filled in
(tests/solved_labs.py), every cell of each. Its launches train 600 steps on 3 ranks, minutes of
a 2-core machine, so they run once: the second notebook replays the first one's
(zerobook.run_cache). make test runs the same solution on a short schedule
(tests/test_capstone_short.py)."""

import os
import shutil
import subprocess
import sys

import nbformat
import pytest

from conftest import ROOT
from solved_labs import solved_version
from zerobook import run_cache

pytestmark = [pytest.mark.slow, pytest.mark.launch]


def test_every_cell_of_both_capstone_notebooks_runs(tmp_path):
    instructor = tmp_path / "instructor" / "capstone.ipynb"
    solved = tmp_path / "solved" / "capstone.ipynb"
    for path in (instructor, solved):
        path.parent.mkdir()
    shutil.copy(ROOT / "labs" / "capstone" / "capstone.ipynb", instructor)
    nbformat.write(solved_version(ROOT / "labs", "capstone"), solved)
    runs = tmp_path / "runs"
    runs.mkdir()
    env = dict(
        os.environ,
        **{run_cache.CACHE_ENV: str(runs), run_cache.WRITE_ENV: run_cache.NEW},
    )
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:xdist"),
            *("--nbval-lax", "--nbval-current-env", "--rootdir", str(tmp_path)),
            *(str(instructor), str(solved)),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,  # the launches take 4-5 minutes alone on 2 cores
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    code_cells = sum(
        c.cell_type == "code"
        for path in (instructor, solved)
        for c in nbformat.read(path, as_version=4).cells
    )
    assert f"{code_cells} passed" in done.stdout, done.stdout[-2000:]
    # "train" and "resume", recorded by the first notebook, replayed by the second
    assert len(list(runs.glob("*.json"))) == 2
