"""A class of Lab 0 graded with low bounds (`--jobs 2`): four students whose functions are
right and whose rank 0 allocates and touches more memory than the bound or fills its folder and
/tmp (each stopped, scoring 0, its reason named), or whose notebook function forks until refused
or opens files until refused: nothing runs that code (the clean run's function server refuses
it by the lab's rules, nbgrader does not execute the notebook, a graded rank cannot fork:
zerobook.trust.graded_rank), so that part scores 0 and the rest counts. The reference is graded
in full; nothing any of them started survives. An untouched release is autograded beside the
reference (two jobs, one gradebook: one writer). The watchdog's bounds on tasks and open files
are tested on programs run in a sandbox directly (tests/test_bounds.py).

One grading run for the module (its own course directory); each test reads what it left.
"""

import csv
import time

import psutil
import pytest
from conftest import ROOT
from grading_helpers import run_grading

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("bounded")]

LAB = "setup_check"
SOURCE = ROOT / "labs" / LAB / f"{LAB}.ipynb"
# Lab 0's reference, graded, used at most 25 tasks, 1.1 GiB (summed RSS) and 62 files in a
# process (measured here, 2 busy cores): the bounds leave it room, the hogs pass them.
BOUNDS = {"TASKS": "160", "MEMORY_MB": "1536", "DISK_MB": "48", "FILES": "256"}
# (a rank script under its lab's rules: no os, no open, no time; what it can still do to the
# machine is memory and disk, through the names the rules offer)
ON_RANK_0 = "import torch as _torch\nif _torch.distributed.get_rank() == 0:\n"
HOGS = {
    "fork_loop": """
    import time
    _until = time.monotonic() + 60
    while time.monotonic() < _until:  # a refused fork is tried again: only a stop ends it
        try:
            if _os.fork() == 0:
                time.sleep(120)
                _os._exit(0)
        except OSError:
            time.sleep(0.05)
""",
    "memory_hog": """
    _held = [bytearray(b"x" * (64 << 20)) for _ in range(24)]  # the whole bound, touched
""",
    "disk_filler": """
    for _where in (".", "/tmp"):
        try:
            for _i in range(8):  # 8 x 16 MiB into each
                _torch.save(_torch.ones(4 << 20), f"{_where}/fill{_i}.bin")
        except (OSError, RuntimeError):
            pass
    for _ in range(10**8):  # kept alive a few seconds, as a slow step would be
        pass
""",
    "fd_leak": """
    _files = []
    try:
        while True:
            _files.append(open("/dev/null"))
    except OSError:
        pass
    import time
    time.sleep(5)
""",
}
REASONS = {
    "memory_hog": "of memory together (the bound is 1536 MiB)",
    "disk_filler": "MiB into its folders (the bound is 48 MiB)",
}


# a graded rank cannot start a process (zerobook.trust.graded_rank) nor open a file (its lab's
# rules): the fork loop and the file leak are written into a notebook function, which only
# the clean run's function server runs, under the same rules
IN_THE_NOTEBOOK = {
    "fork_loop": "part1_expected_total",
    "fd_leak": "part1_expected_total",
}
ON_THE_NOTEBOOK = "import os as _os\nif True:\n"


def with_hog(notebook: str, student: str, hog: str) -> str:
    """The reference notebook, its rank script running `hog` on rank 0 when imported (or the
    notebook cell IN_THE_NOTEBOOK names, when it runs)."""
    import json

    nb = json.loads(notebook)
    where = IN_THE_NOTEBOOK.get(student, "rank_script")
    start = ON_THE_NOTEBOOK if student in IN_THE_NOTEBOOK else ON_RANK_0
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == where:
            cell["source"] = "".join(cell["source"]) + "\n" + start + hog
    return json.dumps(nb)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from grading_helpers import sandbox_or_not

    if sandbox_or_not():
        pytest.skip("bubblewrap does not work here: bounds are enforced in the sandbox")
    root = tmp_path_factory.mktemp("bounded")
    run_grading("release", "--only", LAB, root=root)
    solution = SOURCE.read_text()
    release = (root / "release" / LAB / f"{LAB}.ipynb").read_text()
    for student, notebook in {
        "reference": solution,
        "untouched": release,
        **{name: with_hog(solution, name, hog) for name, hog in HOGS.items()},
    }.items():
        folder = root / "submitted" / student / LAB
        folder.mkdir(parents=True)
        (folder / f"{LAB}.ipynb").write_text(notebook)
    start = time.monotonic()
    env = {f"ZEROBOOK_LIMIT_{k}": v for k, v in BOUNDS.items()}
    done = run_grading("grade", "--jobs", "2", root=root, check=False, env=env)
    return root, done, time.monotonic() - start


def scores(root) -> dict[str, float]:
    with open(root / "grades.csv") as f:
        return {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}


def test_the_mechanism_in_force_is_said(graded):
    _, done, _ = graded
    assert "bounds: tasks by RLIMIT_NPROC" in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize("student", sorted(REASONS))
def test_a_submission_past_a_bound_scores_zero_with_its_reason(graded, student):
    root, done, _ = graded
    line = f"NOT GRADED: {student} / {LAB}: stopped: "
    assert line in done.stdout and REASONS[student] in done.stdout, done.stdout[-4000:]
    assert scores(root)[student] == 0
    page = (root / "feedback" / student / LAB / f"{LAB}.html").read_text()
    assert REASONS[student] in page


@pytest.mark.parametrize("student", sorted(IN_THE_NOTEBOOK))
def test_a_fork_or_an_open_in_a_notebook_function_never_runs_and_costs_that_part(
    graded, student
):
    root, done, _ = graded
    assert f"{student} / {LAB}: graded in" in done.stdout, done.stdout[-4000:]
    assert scores(root)[student] == 5 - 1  # part 1's point, the notebook function's
    page = (root / "feedback" / student / LAB / f"{LAB}.html").read_text()
    assert "os is not a module this lab" in page


def test_everyone_else_is_graded_with_one_writer_of_the_gradebook(graded):
    root, done, _ = graded
    assert scores(root)["reference"] == 5, done.stdout[-4000:]
    assert scores(root)["untouched"] == 0
    for student in ("reference", "untouched"):
        assert f"{student} / {LAB}: graded" in done.stdout
    assert "database is locked" not in done.stdout + done.stderr


def test_nothing_survives(graded):
    from zerobook.classroom.limits import JOB_UIDS, uid_held

    _, done, _ = graded
    uids = {p.info["uids"].real for p in psutil.process_iter(["uids"])} & set(JOB_UIDS)
    orphaned = {
        uid for uid in uids if not uid_held(uid)
    }  # another grading's are its own
    left = [
        p.pid for p in psutil.process_iter(["uids"]) if p.info["uids"].real in orphaned
    ]
    assert not left
