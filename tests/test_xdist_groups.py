"""make test-grading's groups hold: tests marked with one xdist_group share one worker."""

import json
import os
import subprocess
import sys

from conftest import ROOT

PROBE = """
import json, os, pytest

GROUPS = [pytest.param(g, marks=pytest.mark.xdist_group(g)) for g in "abc"]


@pytest.fixture(scope="module", params=GROUPS)
def built(request):
    return request.param


@pytest.mark.parametrize("n", range(3))
def test_member(built, n):
    with open(os.environ["PROBE_OUT"], "a") as f:
        f.write(json.dumps([built, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
"""


def test_a_group_of_tests_runs_on_one_worker(tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    out = tmp_path / "ran.jsonl"
    # (no nbval: its nbformat imports jsonschema, which outside the course's pytest settings
    # builds its IRI grammar in each of the four processes: zerobook/_lazy_iri.py)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.xdist_groups", "-p", "no:nbval",
         "-p", "no:cacheprovider", "--numprocesses=3", "--dist", "loadgroup",
         str(tmp_path / "test_probe.py")],
        cwd=ROOT, env={**os.environ, "PROBE_OUT": str(out),
                       "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {}
    for line in out.read_text().splitlines():
        group, worker = json.loads(line)
        workers.setdefault(group, set()).add(worker)
    assert sorted(workers) == ["a", "b", "c"], workers
    split = {g: w for g, w in workers.items() if len(w) > 1}
    assert not split, f"groups split across workers: {split}"
