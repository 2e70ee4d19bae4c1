"""Hostile and careless submissions, graded as a class (Lab 0, `python -m zerobook.grading grade
--jobs 2`): each attack scores 0 on the part it attacks, cannot touch the other students, the
gradebook or the course, leaves no process behind, and stops nobody else.

One grading run for all of them (its own course directory); each test reads what it left. Lab 2
(data parallelism), whose six tests all read one launch, has a grading run of its own below.
"""

import csv
import html
import json
import subprocess
import time

import psutil
import pytest

from conftest import ROOT
from grading_helpers import part_scores, round_trip, run_grading
from test_grading_labs import POINTS as LAB_POINTS  # each lab's graded parts, points

# one grading run, one worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hostile")]

LAB = "setup_check"
SOURCE = ROOT / "labs" / LAB / f"{LAB}.ipynb"
POINTS = {"test_part1": 1, "test_all_reduce": 2, "test_gather": 2}
# in the command line of a process a submission leaves running
MARK = "zerobook-hostile-4242"


def edit(notebook: str, grade_id: str, change) -> str:
    """The notebook with cell `grade_id`'s source replaced by change(source)."""
    nb = json.loads(notebook)
    cell = next(
        c
        for c in nb["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id
    )
    cell["source"] = change("".join(cell["source"]))
    return json.dumps(nb)


def as_run(notebook: str, grade_id: str, printed: str) -> str:
    """The notebook as the student saved it after running cell `grade_id`, which printed
    `printed` (the feedback shows the outputs as submitted: zerobook.classroom.feedback)."""
    nb = json.loads(notebook)
    cell = next(
        c
        for c in nb["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id
    )
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": printed}]
    return json.dumps(nb)


def cell_after(notebook: str, grade_id: str, code: str) -> str:
    """The notebook with a code cell of the student's own after cell `grade_id`: nbgrader's
    kernel runs it; the clean run runs only the graded cells (the functions under the lab's
    rules, zerobook.trust.restricted), so the attack reaches the kernel's side alone."""
    nb = json.loads(notebook)
    at = next(
        i
        for i, c in enumerate(nb["cells"])
        if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id
    )
    cell = {"cell_type": "code", "metadata": {}, "source": code, "outputs": []}
    nb["cells"].insert(at + 1, dict(cell, execution_count=None))
    return json.dumps(nb)


def with_rank_functions(notebook: str, body: str, module_code: str = "") -> str:
    """The release's rank script with both functions' stubs replaced by `body` (not a stub, so the
    part launches) and `module_code` appended (what runs when the harness imports the file)."""
    stub = "    # YOUR CODE HERE\n    raise NotImplementedError()"
    return edit(
        notebook, "rank_script", lambda s: s.replace(stub, body) + "\n" + module_code
    )


FAKE_RUN_PART = """
import socket
import zerobook as zb

class _Run:
    def __init__(self, ranks):
        self.ranks = ranks

def _fake(lab, student_file, part, nproc=4, **options):  # the secret checks faked too
    if part == "all_reduce":
        total = float(nproc * (nproc + 1) // 2)
        return _Run([{"total": total, "secret_total": 1.0, "secret_truth": 1.0}] * nproc)
    truth = [{"rank": r, "backend": "gloo", "device": "cpu", "host": socket.gethostname()} for r in range(nproc)]
    return _Run([{"seen": truth, "truth": t, "secret_hosts": [], "secret_truth": []} for t in truth])

zb.grading.run_part = _fake
"""
WRAP_REPORT = """
import zerobook as zb
_real = zb.report

def _forged(**values):
    if "total" in values:
        values["total"] = 10.0
    if "seen" in values:
        values["seen"] = [dict(values["truth"], rank=r) for r in range(4)]
    _real(**values)

zb.report = _forged
"""
FORGE_AND_EXIT = """    import json, os
    name = "rank%d.json" % dist.get_rank()
    forged = {"total": 10.0}
    with open(os.path.join(os.environ.get("ZEROBOOK_REPORT_DIR", "."), name), "w") as f:
        json.dump(forged, f)
    os._exit(0)"""
READ_COURSE = """
import json, os, pathlib, zerobook
for _root in (os.environ.get("ZEROBOOK_COURSE_ROOT", "/nonexistent") + "/../../labs", str(pathlib.Path(zerobook.__file__).parents[1] / "labs")):
    _path = pathlib.Path(_root) / "setup_check" / "setup_check.ipynb"
    if _path.exists():
        _cells = json.loads(_path.read_text())["cells"]
        _code = next("".join(c["source"]) for c in _cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "rank_script")
        exec(_code.split("\\n", 1)[1], globals())
        break
"""
VANDAL = """
import os, pathlib, shutil, sqlite3, subprocess, zerobook
course = pathlib.Path.cwd().parents[2]  # autograded/STUDENT/LAB -> the course directory
for target in [course / "submitted" / "reference" / "setup_check" / "setup_check.ipynb",
               course / "autograded" / "reference" / "setup_check" / "setup_check.ipynb"]:
    try:
        target.write_text("{}")
    except Exception as exc:
        print("could not overwrite", target, type(exc).__name__)
try:
    db = sqlite3.connect(course / "gradebook.db")
    db.execute("update grade set manual_score = 0")
    db.commit()
except Exception as exc:
    print("could not rewrite the gradebook", type(exc).__name__)
for source in (pathlib.Path(zerobook.__file__).parents[1] / "labs" / "setup_check" / "setup_check.ipynb",):
    try:
        source.unlink()
    except Exception as exc:
        print("could not delete", source, type(exc).__name__)
subprocess.Popen(["sleep", "600", "MARK"], start_new_session=True)
""".replace("MARK", MARK)

# Links left where the trusted side reads or writes after the student's code: its own
# autograded notebook made a link to another student's submission, to the grader's stdout;
# links to the instructor's notebook and the gradebook left beside it (nbgrader copies the
# folder's other files into the feedback); a rank's report linked to /dev/zero once that rank
# had finished. Each in a cell of its own after the one that defines expected_total (nbgrader's
# kernel runs it in the notebook's folder; the clean run runs the graded cells only).
LINK_OVER_REFERENCE = """
import os, pathlib
try:
    _victim = pathlib.Path.cwd().parents[2] / "submitted" / "reference" / "setup_check"
    os.remove("setup_check.ipynb")
    os.symlink(_victim / "setup_check.ipynb", "setup_check.ipynb")
except OSError as exc:
    print("could not link", type(exc).__name__)
"""
LINK_TO_STDOUT = """
import os
try:
    os.remove("setup_check.ipynb")
    os.symlink("/proc/self/fd/1", "setup_check.ipynb")
except OSError as exc:
    print("could not link", type(exc).__name__)
"""
LINK_SECRETS = """
import os, pathlib, zerobook
_course = pathlib.Path.cwd().parents[2]
_labs = pathlib.Path(zerobook.__file__).parents[1] / "labs" / "setup_check"
for _name, _target in (("solution.txt", _labs / "setup_check.ipynb"),
                       ("grades.db", _course / "gradebook.db")):
    try:
        os.symlink(_target, _name)
    except OSError as exc:
        print("could not link", type(exc).__name__)
"""
POISON_REPORT = """

import os as _os
import time as _time


def _link_rank0_report_to_dev_zero():
    folder = _os.environ.get("ZEROBOOK_REPORT_DIR", ".")
    deadline = _time.monotonic() + 20
    while not _os.path.exists(_os.path.join(folder, "rank0.done")):
        if _time.monotonic() > deadline:
            return
        _time.sleep(0.05)
    _os.symlink("/dev/zero", _os.path.join(folder, "zero"))
    _os.replace(_os.path.join(folder, "zero"), _os.path.join(folder, "rank0.json"))
"""
HIDDEN_TEST = "for world_size in (1, 2, 7, 64)"  # in the instructor's notebook only
SQLITE = b"SQLite format 3\x00"  # the first bytes of the gradebook


def planted(root) -> dict:
    """student -> how their submitted folder is made, holding a link: the notebook itself
    linked to the instructor's (which would score full marks, solutions and all), or a
    notebook beside a link to /dev/zero (nbgrader would copy it without end)."""
    release = root / "release" / LAB / f"{LAB}.ipynb"

    def notebook_is_a_link(folder):
        (folder / f"{LAB}.ipynb").symlink_to(SOURCE)

    def beside_dev_zero(folder):
        (folder / f"{LAB}.ipynb").write_text(release.read_text())
        (folder / "data.bin").symlink_to("/dev/zero")

    return {"submits_link": notebook_is_a_link, "submits_dev_zero": beside_dev_zero}


def submissions(root) -> dict[str, str]:
    release = (root / "release" / LAB / f"{LAB}.ipynb").read_text()
    solution = SOURCE.read_text()
    part1_ok = lambda nb: edit(
        nb,
        "part1_expected_total",
        lambda s: s.replace(
            "    # YOUR CODE HERE\n    raise NotImplementedError()",
            "    return world_size * (world_size + 1) // 2",
        ),
    )
    return {
        "reference": solution,
        "patch_run_part": edit(
            release, "part1_expected_total", lambda s: s + "\n" + FAKE_RUN_PART
        ),
        "wrap_report": with_rank_functions(release, "    return None", WRAP_REPORT),
        "forge_and_exit": with_rank_functions(release, FORGE_AND_EXIT),
        "read_course": with_rank_functions(release, "    return None", READ_COURSE),
        "vandal": cell_after(part1_ok(release), "part1_expected_total", VANDAL),
        "kernel_exit": edit(
            solution, "part1_expected_total", lambda s: s + "\nimport os\nos._exit(3)\n"
        ),
        "ignores_interrupt": edit(
            solution,
            "part1_expected_total",
            lambda s: (
                s
                + (
                    "\nimport signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)\n"
                )
            ),
        ),
        "floods": as_run(  # the page shows what the student's run left, cut
            edit(
                solution,
                "part1_expected_total",
                lambda s: s + "\nprint('x' * 50_000_000)\n",
            ),
            "part1_expected_total",
            "x" * 3_000_000,
        ),
        "not_json": solution[: len(solution) // 3],
        **{
            student: cell_after(part1_ok(release), "part1_expected_total", code)
            for student, code in (
                ("link_over_reference", LINK_OVER_REFERENCE),
                ("link_to_stdout", LINK_TO_STDOUT),
                ("link_secrets", LINK_SECRETS),
            )
        },
        "poison_report": edit(
            solution,
            "rank_script",
            lambda s: (
                s.replace(
                    "    return value.item()",
                    "    if rank == 1:\n        _link_rank0_report_to_dev_zero()\n"
                    "    return value.item()",
                )
                + POISON_REPORT
            ),
        ),
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One grading run for the module, shared by the xdist workers that get its tests (the first
    grades under a lock, the others read what it left)."""
    import os

    from filelock import FileLock
    from grading_helpers import sandbox_or_not

    if sandbox_or_not():
        pytest.skip(
            "bubblewrap does not work here: hostile submissions are graded only in the sandbox"
        )
    base = tmp_path_factory.getbasetemp()
    # this session's, shared by its workers
    base = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root, done_file = base / "hostile", base / "hostile.json"
    with FileLock(str(base / "hostile.lock")):
        if not done_file.exists():
            done_file.write_text(json.dumps(grade_class(root)))
    done = json.loads(done_file.read_text())
    result = subprocess.CompletedProcess(
        done["args"], done["returncode"], done["stdout"], done["stderr"]
    )
    return (
        root,
        result,
        done["seconds"],
        part_scores(root, LAB, POINTS),
        bytes.fromhex(done["source_before"]),
    )


def grade_class(root) -> dict:
    """Release Lab 0, submit every hostile notebook, grade them all (--jobs 2): what it printed."""
    run_grading("release", "--only", LAB, root=root)
    for student, notebook in submissions(root).items():
        folder = root / "submitted" / student / LAB
        folder.mkdir(parents=True)
        (folder / f"{LAB}.ipynb").write_text(notebook)
    for student, plant in planted(root).items():
        folder = root / "submitted" / student / LAB
        folder.mkdir(parents=True)
        plant(folder)
    source_before = SOURCE.read_bytes()
    before = {  # what links point to, as it was
        "source_mode": SOURCE.stat().st_mode,
        "gradebook_mode": (root / "gradebook.db").stat().st_mode,
        "reference": (
            root / "submitted" / "reference" / LAB / f"{LAB}.ipynb"
        ).read_text(),
    }
    start = time.monotonic()
    done = run_grading("grade", "--jobs", "2", root=root, check=False)
    return {
        "args": done.args,
        "returncode": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr,
        "seconds": time.monotonic() - start,
        "source_before": source_before.hex(),
        "before": before,
    }


def total(root, student) -> float:
    with open(root / "grades.csv") as f:
        return {
            r["student_id"]: float(r["score"])
            for r in csv.DictReader(f)
            if r["assignment"] == LAB
        }[student]


@pytest.mark.parametrize(
    "student", ["patch_run_part", "wrap_report", "forge_and_exit", "read_course"]
)
def test_forging_a_score_scores_zero_on_the_forged_parts(graded, student):
    root, done, _, scores, _ = graded
    assert (
        scores[student]["test_all_reduce"] == 0 and scores[student]["test_gather"] == 0
    ), (student, scores[student])
    assert total(root, student) == 0, done.stdout[-3000:]


def test_a_run_part_patched_in_the_notebook_never_runs_and_the_clean_run_counts(graded):
    """Its cell replaces zerobook.grading.run_part: nothing runs it but the clean run's function
    server, whose rules refuse zerobook (nbgrader does not execute the notebook). (It was
    flagged when nbgrader's run of the notebook, which the patch fooled, disagreed with the
    clean run; there is no such run now, and a notebook cell may import zerobook.)"""
    root, _, _, scores, _ = graded
    assert scores["patch_run_part"]["test_part1"] == 0
    page = feedback_page(root, "patch_run_part", LAB)
    assert "zerobook is not a module this lab's file may import" in page


def test_a_wrapped_report_is_named_as_tampering(graded):
    root, _, _, _, _ = graded
    page = feedback_page(root, "wrap_report", LAB)  # the lab's rules refuse it first
    assert "zerobook is not a module this lab's file may import" in page


def test_vandalism_reaches_nobody_else_nor_the_gradebook_nor_the_course(graded):
    root, _, _, scores, source_before = graded
    assert scores["reference"] == POINTS and total(root, "reference") == sum(
        POINTS.values()
    )
    notebook = json.loads(
        (root / "submitted" / "reference" / LAB / f"{LAB}.ipynb").read_text()
    )
    assert notebook["cells"]  # not overwritten with {}
    assert SOURCE.read_bytes() == source_before
    assert scores["vandal"]["test_part1"] == 1  # its honest part still counts


def before_grading(root) -> dict:
    """What grade_class noted before grading: the modes of what links point to, and the
    reference's submitted notebook."""
    return json.loads((root.parent / "hostile.json").read_text())["before"]


def test_a_notebook_linked_over_another_submission_reaches_nobody_else(graded):
    """Attack 1: its autograded notebook became a link to the reference's submission, and
    nbgrader, outside the sandbox, wrote through it (the reference was zeroed). The kernel
    now works in a copy of its folder: the link stays there."""
    root, _, _, scores, _ = graded
    submitted = root / "submitted" / "reference" / LAB / f"{LAB}.ipynb"
    assert submitted.read_text() == before_grading(root)["reference"]
    assert scores["reference"] == POINTS
    assert total(root, "reference") == sum(POINTS.values())
    # its honest part counts, nothing more
    assert scores["link_over_reference"] == {
        "test_part1": 1,
        "test_all_reduce": 0,
        "test_gather": 0,
    }


def test_links_left_beside_the_notebook_bring_no_secret_into_any_feedback(graded):
    """Attack 2: links to the instructor's notebook and to the gradebook, left in the
    notebook's folder, were copied into its feedback by nbgrader (and their targets made
    read-only). No feedback file holds a hidden test or the gradebook's bytes now."""
    root, _, _, scores, _ = graded
    for path in (root / "feedback").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert HIDDEN_TEST.encode() not in data and SQLITE not in data, path
    theirs = root / "feedback" / "link_secrets" / LAB
    assert sorted(p.name for p in theirs.iterdir()) == [f"{LAB}.html"]
    before = before_grading(root)
    assert SOURCE.stat().st_mode == before["source_mode"]
    assert (root / "gradebook.db").stat().st_mode == before["gradebook_mode"]
    assert scores["link_secrets"]["test_part1"] == 1


def test_a_notebook_linked_to_the_graders_stdout_stops_nobody(graded):
    """Attack 3: its autograded notebook became a link to /proc/self/fd/1, and reading it
    back stopped the whole class's grading (no grades.csv). Now: everyone is graded but those
    who could not be, each with a reason, and grades.csv has a row for every one."""
    root, done, _, scores, _ = graded
    not_graded = {"not_json", *planted(root)}
    everyone = {*submissions(root), *planted(root)}
    lines = done.stdout.splitlines()
    graded_ = {
        line.split(" / ")[0] for line in lines if f" / {LAB}: graded in " in line
    }
    failed = {
        line.split(" / ")[0].removeprefix("NOT GRADED: ")
        for line in lines
        if line.startswith("NOT GRADED: ")
    }
    assert (graded_, failed) == (everyone - not_graded, not_graded), done.stdout[-3000:]
    with open(root / "grades.csv") as f:
        rows = {r["student_id"] for r in csv.DictReader(f) if r["assignment"] == LAB}
    assert rows == everyone
    assert scores["link_to_stdout"]["test_part1"] == 1


def test_a_report_linked_to_dev_zero_by_another_rank_fails_that_part_saying_why(graded):
    """Attack 4: once rank 0 had finished, rank 1 replaced its report by a link to /dev/zero,
    which the trusted clean run read without bound. The lab's rules now refuse the file (os,
    time): no rank part runs, the notebook's part counts. (A report left as a link is read
    as untrusted all the same: tests/test_untrusted.py.)"""
    root, _, _, scores, _ = graded
    assert scores["poison_report"] == {
        "test_part1": 1,
        "test_all_reduce": 0,
        "test_gather": 0,
    }
    page = feedback_page(root, "poison_report", LAB)
    assert "os is not a module this lab's file may import" in page


@pytest.mark.parametrize(
    "student, named",
    [("submits_link", f"{LAB}.ipynb"), ("submits_dev_zero", "data.bin")],
)
def test_a_submitted_folder_holding_a_link_is_not_graded_naming_it(
    graded, student, named
):
    """A link in the folder the instructor collected (nbgrader's autograde copies following
    links: the instructor's notebook would be graded and shown; /dev/zero copied without
    end): checked before anything reads the folder; that student alone is not graded."""
    root, done, _, _, _ = graded
    reason = f"submit regular files only, at most 1,000 of them and 128 MiB: {LAB}/{named} is a symbolic link"
    assert f"NOT GRADED: {student} / {LAB}: {reason}" in done.stdout, done.stdout[
        -3000:
    ]
    assert total(root, student) == 0
    assert reason in feedback_page(root, student, LAB)
    assert not (root / "autograded" / student).exists()


def test_no_process_a_submission_started_survives_grading(graded):
    left = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if MARK in " ".join(p.info["cmdline"] or [])
    ]
    assert not left


@pytest.mark.parametrize(
    "student, module", [("kernel_exit", "os"), ("ignores_interrupt", "signal")]
)
def test_a_function_that_would_kill_or_hang_its_kernel_costs_its_part_alone(
    graded, student, module
):
    """os._exit(3), or a loop that ignores interrupts, in a notebook function: it killed or
    hung nbgrader's run of the notebook, which no longer executes it; the clean run's function
    server refuses the module it needs, so that part scores 0 and the rank parts count."""
    root, done, _, scores, _ = graded
    assert f"{student} / {LAB}: graded in" in done.stdout, done.stdout[-3000:]
    assert scores[student] == {**POINTS, "test_part1": 0}
    page = feedback_page(root, student, LAB)
    assert f"{module} is not a module this lab's file may import" in page


def test_a_notebook_that_cannot_be_graded_scores_zero_with_its_reason_and_stops_nobody(
    graded,
):
    root, done, _, _, _ = graded
    student = "not_json"
    assert f"NOT GRADED: {student} / {LAB}" in done.stdout, done.stdout[-3000:]
    assert done.returncode == 1
    assert total(root, student) == 0
    page = (root / "feedback" / student / LAB / f"{LAB}.html").read_text()
    assert "could not be graded" in page


def test_a_flood_is_cut_and_its_feedback_stays_small(graded):
    root, _, _, scores, _ = graded
    feedback = root / "feedback" / "floods" / LAB / f"{LAB}.html"
    assert feedback.stat().st_size < 1_000_000
    assert (
        root / "autograded" / "floods" / LAB / f"{LAB}.ipynb"
    ).stat().st_size < 1_000_000
    assert "more characters cut" in feedback.read_text()


def test_feedback_shows_no_hidden_test_source(graded):
    root, _, _, _, _ = graded
    page = (root / "feedback" / "reference" / LAB / f"{LAB}.html").read_text()
    assert (
        "hidden tests: not shown" in page
        and "for world_size in (1, 2, 7, 64)" not in page
    )


def test_grading_the_class_finished_within_its_bound(graded):
    _, _, seconds, _, _ = graded
    assert seconds < 900


def test_grading_again_regrades_only_what_changed(graded, tmp_path):
    import shutil

    root = tmp_path / "again"  # a copy: the other tests read the first run's files
    shutil.copytree(graded[0], root, symlinks=True)  # data.bin links to /dev/zero
    # fixed and resubmitted
    (root / "submitted" / "not_json" / LAB / f"{LAB}.ipynb").write_text(
        SOURCE.read_text()
    )
    done = run_grading("grade", "--only", LAB, root=root, check=False)
    assert (
        "graded " in done.stdout and "not_json / setup_check: graded" in done.stdout
    ), done.stdout[-3000:]
    assert "reference / setup_check" not in done.stdout  # unchanged: not graded again
    assert total(root, "not_json") == sum(POINTS.values())


# Lab 2 (data parallelism): one run read by every test, so an attack on the run is an attack
# on every part. Each submission's rank script is a DDP of its own, plus what it does on import.
DDP_POINTS = LAB_POINTS["ddp"]
LAZY_DDP = (ROOT / "tests" / "forgeries" / "lazy_ddp.py").read_text()
FORGE_PARITY = """
import zerobook as zb
_real = zb.report

def _forged(**values):
    values["broadcast"] = {"diff": 0.0, "worst": None, "calls": 41}
    values["parity"] = {"diff": 0.0, "worst": None}
    _real(**values)

zb.report = _forged
"""
BYPASS = '''
import subprocess
from torch.distributed import distributed_c10d

def _unseen(tensor, op=None, group=None, async_op=False):
    """The process group's own all-reduce: no record, no rank order, a handle that is done."""
    distributed_c10d._get_default_group().allreduce([tensor]).wait()
    return _Done() if async_op else None

class _Done:
    def wait(self, timeout=None):
        return True

dist.all_reduce = distributed_c10d.all_reduce = _unseen
try:  # a graded rank starts no process (zerobook.trust.graded_rank): refused
    subprocess.Popen(["sleep", "600", "MARK"], start_new_session=True)
except PermissionError:
    pass
'''.replace("MARK", MARK + "-ddp")
PATCH_WAIT = '''
from zerobook.data_parallel import inflight
_real_wait = inflight.Handle.wait

def _quiet_wait(self, timeout=None):
    """Waits, but records the wait only once backward is over (a wait at once is hidden)."""
    if ["finish"] in self.flight.events[-60:]:
        self.flight.events.append(["wait", self.index])
    if self.result is not None:
        self.tensor.copy_(self.result)
        self.result = None
    return True

inflight.Handle.wait = _quiet_wait
'''


def ddp_submissions() -> dict[str, str]:
    """The instructor's notebook, and three whose rank script attacks the one run."""
    from grading_helpers import source

    from zerobook.grading import reference_script

    reference = source("ddp")
    solution = reference_script(ROOT / "labs", "ddp")
    waits_at_once = solution.replace(
        "        work = dist.all_reduce(flat, async_op=True)\n",
        "        work = dist.all_reduce(flat, async_op=True)\n        work.wait()\n",
    )
    script = lambda code: edit(
        reference, "rank_script", lambda s: "%%writefile ddp_student.py\n" + code
    )
    return {
        "reference": reference,
        "forge_parity": script(LAZY_DDP + FORGE_PARITY),
        "bypass_all_reduce": script(
            solution.replace(
                "import torch.distributed as dist\n",
                "import torch.distributed as dist\n" + BYPASS,
                1,
            )
        ),
        "patch_wait": script(waits_at_once + PATCH_WAIT),
    }


def graded_class(
    tmp_path_factory,
    lab: str,
    submissions: dict,
    points: dict,
    limit_s: int = 900,
    labs=None,
    limits: dict | None = None,
):
    """One grading run of `submissions` (student -> notebook) of `lab`, in a course
    directory of its own, stopped after `limit_s`: (root, the grading's process, scores).
    labs: an instructor's copy of labs/ (its hidden parameters), default labs/; limits:
    the lab's limits as if already measured (lab_limits' cache), so no reference run."""
    from grading_helpers import sandbox_or_not

    if sandbox_or_not():
        pytest.skip(
            "bubblewrap does not work here: hostile submissions are graded only in the sandbox"
        )
    root = tmp_path_factory.mktemp(f"hostile_{lab}")
    run_grading("release", "--only", lab, root=root, labs=labs)
    if limits:
        from conftest import ROOT
        from zerobook.classroom.clean_run import limits_version

        version = limits_version(labs or ROOT / "labs", lab)
        (root / "limits.json").write_text(
            json.dumps({lab: {**limits, "version": version}})
        )
    for student, notebook in submissions.items():
        folder = root / "submitted" / student / lab
        folder.mkdir(parents=True)
        (folder / f"{lab}.ipynb").write_text(notebook)
    done = run_grading(
        "grade", "--jobs", "2", root=root, check=False, timeout=limit_s, labs=labs
    )
    return root, done, part_scores(root, lab, points)


def feedback_page(root, student, lab) -> str:
    """The text of a student's feedback page for `lab`, tags removed."""
    import re

    page = (root / "feedback" / student / lab / f"{lab}.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.fixture(scope="module")
def graded_ddp(tmp_path_factory):
    """One grading run of the Lab 2 submissions above (its own course directory)."""
    return graded_class(tmp_path_factory, "ddp", ddp_submissions(), DDP_POINTS)


def ddp_page(root, student) -> str:
    return feedback_page(root, student, "ddp")


def test_lab2_a_forged_report_scores_zero_everywhere_and_is_named(graded_ddp):
    root, done, scores = graded_ddp
    assert scores["reference"] == DDP_POINTS, done.stdout[-3000:]
    assert scores["forge_parity"] == {part: 0 for part in DDP_POINTS}
    refused = "zerobook is not a module this lab's file may import"  # its rules, first
    assert refused in ddp_page(root, "forge_parity")


def test_lab2_an_all_reduce_that_bypasses_the_record_scores_zero_and_is_named(
    graded_ddp,
):
    """Its own all_reduce, through the process group, put in dist.all_reduce's place: the
    lab's rules refuse the process group's module and its private methods, and subprocess,
    by name; no part counts; the process it tried to leave behind was never started."""
    root, _, scores = graded_ddp
    assert scores["bypass_all_reduce"] == dict.fromkeys(DDP_POINTS, 0)
    page = ddp_page(root, "bypass_all_reduce")
    assert "torch.distributed.distributed_c10d is not a name this lab's file" in page
    left = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if MARK + "-ddp" in " ".join(p.info["cmdline"] or [])
    ]
    assert not left


def test_lab2_a_patched_wait_that_hides_a_wait_at_once_scores_zero_and_is_named(
    graded_ddp,
):
    root, _, scores = graded_ddp
    assert scores["patch_wait"] == {part: 0 for part in DDP_POINTS}
    refused = "zerobook.data_parallel is not a module this lab's file may import"
    assert refused in ddp_page(root, "patch_wait")


# Lab 4 (ZeRO-2 in FSDP2's layout): one run read by every test, as Lab 2's. Each submission
# is the reference's rank script with a mistake, plus what it does on import.
ZERO_POINTS = LAB_POINTS["zero"]
FORGE_RUNS = """
import zerobook as zb
_real = zb.report

def _forged(**values):
    for run in values["runs"].values():
        run["parity"] = {"diff": 0.0, "worst": None}
    _real(**values)

zb.report = _forged
"""
HIDE_ALL_REDUCE = '''
from zerobook.data_parallel import comm
_real_record = comm.CommMeter._record_collective

def _quiet(self, name, *args):
    """Records every collective but the all-reduces (the traffic part would see them)."""
    if name != "all_reduce":
        _real_record(self, name, *args)

comm.CommMeter._record_collective = _quiet
'''
BYPASS_REDUCE_SCATTER = '''
import subprocess
from torch.distributed import distributed_c10d

def _unseen(output, input, op=None, group=None, async_op=False):
    """The process group's own reduce-scatter: no record, no rank order, done at once."""
    distributed_c10d._get_default_group()._reduce_scatter_base(output, input).wait()
    return _Done() if async_op else None

class _Done:
    def wait(self, timeout=None):
        return True

dist.reduce_scatter_tensor = distributed_c10d.reduce_scatter_tensor = _unseen
try:  # a graded rank starts no process (zerobook.trust.graded_rank): refused
    subprocess.Popen(["sleep", "600", "MARK"], start_new_session=True)
except PermissionError:
    pass
'''.replace("MARK", MARK + "-zero")


def zero_submissions() -> dict[str, str]:
    """The instructor's notebook, and four whose rank script attacks the one run or
    imports what the lab forbids."""
    from grading_helpers import source

    from zerobook.grading import reference_script

    reference = source("zero")
    solution = reference_script(ROOT / "labs", "zero")
    imports = "import torch.distributed as dist\n"
    decay_1d = solution.replace(
        '[{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]',
        '[{"params": decay + no_decay}]',
    )
    all_reduce = solution.replace(
        "work = dist.reduce_scatter_tensor(out, flat, async_op=True)",
        "work = dist.all_reduce(flat, async_op=True)",
    )
    script = lambda code: edit(
        reference, "rank_script", lambda s: "%%writefile zero_student.py\n" + code
    )
    return {
        "reference": reference,
        "forge_parity": script(decay_1d + FORGE_RUNS),
        "hide_all_reduce": script(all_reduce + HIDE_ALL_REDUCE),
        "bypass_reduce_scatter": script(
            solution.replace(imports, imports + BYPASS_REDUCE_SCATTER, 1)
        ),
        "borrows_fsdp": script(
            solution.replace(
                imports, imports + "from torch.distributed.fsdp import fully_shard\n", 1
            )
        ),
    }


@pytest.fixture(scope="module")
def graded_zero(tmp_path_factory):
    """One grading run of the Lab 4 submissions above (its own course directory)."""
    return graded_class(tmp_path_factory, "zero", zero_submissions(), ZERO_POINTS)


def zero_page(root, student) -> str:
    return feedback_page(root, student, "zero")


def test_lab4_a_forged_report_or_a_patched_meter_scores_zero_everywhere_and_is_named(
    graded_zero,
):
    root, done, scores = graded_zero
    assert scores["reference"] == ZERO_POINTS, done.stdout[-3000:]
    for student, named in (
        ("forge_parity", "zerobook is not a module this lab's file may import"),
        (
            "hide_all_reduce",
            "zerobook.data_parallel is not a module this lab's file may import",
        ),
    ):
        assert scores[student] == {part: 0 for part in ZERO_POINTS}, student
        assert named in zero_page(root, student)


def test_lab4_a_reduce_scatter_that_bypasses_the_record_scores_zero_and_is_named(
    graded_zero,
):
    """Its own reduce-scatter, through the process group, put in dist's place: the lab's
    rules refuse the process group's module by name, so no part counts; the process it
    tried to leave was never started."""
    root, _, scores = graded_zero
    assert scores["bypass_reduce_scatter"] == dict.fromkeys(ZERO_POINTS, 0)
    page = zero_page(root, "bypass_reduce_scatter")
    assert "torch.distributed.distributed_c10d is not a name this lab's file" in page
    left = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if MARK + "-zero" in " ".join(p.info["cmdline"] or [])
    ]
    assert not left


def test_lab4_a_file_that_imports_fsdp_scores_zero_saying_why(graded_zero):
    root, _, scores = graded_zero
    assert scores["borrows_fsdp"] == {part: 0 for part in ZERO_POINTS}
    assert "torch.distributed.fsdp is" in zero_page(root, "borrows_fsdp")


def test_a_ring_imported_from_the_course_scores_zero_saying_why(tmp_path):
    """The trial's one-line ring submission (Lab 3) scored 5/5: its ring is the course's own
    (zerobook.data_parallel.collectives), which the harness refuses; every part scores 0 and the
    feedback says why."""
    lab, points = "ring_allreduce", {"test_correct": 3, "test_bytes": 2}
    borrowed = "from zerobook.data_parallel.collectives import ring_all_reduce\n"

    def submission(root):
        release = (root / "release" / lab / f"{lab}.ipynb").read_text()
        return {
            lab: {
                "borrower": edit(
                    release,
                    "rank_script",
                    lambda s: s.split("\n", 1)[0] + "\n" + borrowed,
                )
            }
        }

    round_trip(tmp_path, submission, [lab])
    assert part_scores(tmp_path, lab, points)["borrower"] == {
        part: 0 for part in points
    }
    page = html.unescape(
        (tmp_path / "feedback" / "borrower" / lab / f"{lab}.html").read_text()
    )
    assert (
        "zerobook.data_parallel.collectives is not a module this lab's file may import"
        in page
    )


# Lab 5 (ZeRO-3): like Lab 2, six tests read one launch; each attack is on that run.
ZERO3_POINTS = LAB_POINTS["zero3"]
LAZY_ZERO3 = '''
class Zero3:
    """No sharding at all: every rank keeps the whole model and steps it on its own."""

    def __init__(self, model, units, optimizer_class, **options):
        self.optimizer = optimizer_class(model.parameters(), **options)

    def step(self):
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad()
'''
FORGE_ZERO3 = """
import zerobook as zb
_real = zb.report

def _forged(**values):
    values["parity"] = {"step": None, "diff": 0.0, "worst": None, "missing": [], "mean": "sum / N"}
    _real(**values)

zb.report = _forged
"""
BYPASS_ZERO3 = '''
import subprocess
from torch.distributed import distributed_c10d

def _unseen(output, input, group=None, async_op=False):
    """The process group's own all-gather: no record; its own work is the handle."""
    work = distributed_c10d._get_default_group()._allgather_base(output, input)
    return work if async_op else work.wait() and None

dist.all_gather_into_tensor = distributed_c10d.all_gather_into_tensor = _unseen
try:  # a graded rank starts no process (zerobook.trust.graded_rank): refused
    subprocess.Popen(["sleep", "600", "MARK"], start_new_session=True)
except PermissionError:
    pass
'''.replace("MARK", MARK + "-zero3")
PATCH_WAIT_ZERO3 = """
from zerobook.data_parallel import inflight
_real_wait = inflight.Handle.wait
inflight.Handle.wait = lambda self, timeout=None: _real_wait(self, timeout)
"""


def zero3_submissions() -> dict[str, str]:
    """The instructor's notebook, and four whose rank script attacks the one run."""
    from grading_helpers import source

    from zerobook.grading import reference_script

    reference = source("zero3")
    solution = reference_script(ROOT / "labs", "zero3")
    script = lambda code: edit(
        reference, "rank_script", lambda s: "%%writefile zero3_student.py\n" + code
    )
    imports = "import torch.distributed as dist\n"
    return {
        "reference": reference,
        "forge_parity": script(LAZY_ZERO3 + FORGE_ZERO3),
        "bypass_all_gather": script(
            solution.replace(imports, imports + BYPASS_ZERO3, 1)
        ),
        "patch_wait": script(solution + PATCH_WAIT_ZERO3),
        "borrows_zero": script(
            "from zerobook.zero import Zero3AdamW as Zero3  # noqa: F401\n"
        ),
    }


@pytest.fixture(scope="module")
def graded_zero3(tmp_path_factory):
    """One grading run of the Lab 5 submissions above (its own course directory)."""
    return graded_class(tmp_path_factory, "zero3", zero3_submissions(), ZERO3_POINTS)


def test_lab5_forged_patched_or_borrowed_runs_score_zero_everywhere_and_are_named(
    graded_zero3,
):
    root, done, scores = graded_zero3
    assert scores["reference"] == ZERO3_POINTS, done.stdout[-3000:]
    named = {
        "forge_parity": "zerobook is not a module this lab's file may import",
        "patch_wait": "zerobook.data_parallel is not a module this lab's file may",
        "borrows_zero": "zerobook.zero is not a module this lab's file may import",
    }
    for student, says in named.items():
        assert scores[student] == dict.fromkeys(ZERO3_POINTS, 0), student
        assert says in feedback_page(root, student, "zero3"), student


def test_lab5_an_all_gather_that_bypasses_the_record_scores_zero_and_is_named(
    graded_zero3,
):
    """Its own all-gather, through the process group, put in dist's place: the lab's rules
    refuse the process group's module by name, so no part counts; the process it tried to
    leave was never started."""
    root, _, scores = graded_zero3
    assert scores["bypass_all_gather"] == dict.fromkeys(ZERO3_POINTS, 0)
    page = feedback_page(root, "bypass_all_gather", "zero3")
    assert "torch.distributed.distributed_c10d is not a name this lab's file" in page
    left = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if MARK + "-zero3" in " ".join(p.info["cmdline"] or [])
    ]
    assert not left
