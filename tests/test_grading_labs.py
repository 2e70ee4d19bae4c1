"""The instructor's full round trip for every lab after Lab 0 (`make test-all`): release, submit
the instructor notebook ("reference") and the untouched release, autograde, read the gradebook.

`make test` covers the same ground more cheaply: the grading machinery by Lab 0's round trip
(tests/test_grading.py), every lab's reference with its hidden tests by nbval over labs/, the
untouched release of every lab by tests/test_labs.py (each lab's mistakes: tests/test_lab_<lab>.py). Each lab here has a course directory of its
own, so that pytest-xdist can run them side by side.
"""

import html

import pytest

from grading_helpers import (
    part_scores,
    reference_and_release,
    round_trip,
    source,
    written_answers,
)

pytestmark = [pytest.mark.grading, pytest.mark.slow]

POINTS = {
    "memory": {"test_accounting": 2, "test_measurement": 3},
    "ddp": {
        "test_broadcast": 1,
        "test_parity": 2,
        "test_once": 2,
        "test_buckets": 2,
        "test_overlap": 2,
        "test_waits": 1,
    },
    "ring_allreduce": {"test_correct": 3, "test_bytes": 2},
    "zero": {
        "test_parity": 3,
        "test_state": 2,
        "test_held": 2,
        "test_buckets": 2,
        "test_overlap": 2,
        "test_traffic": 1,
    },
    "zero3": {
        "test_parity": 2,
        "test_kept": 2,
        "test_peak": 2,
        "test_traffic": 2,
        "test_forward": 2,
        "test_backward": 2,
    },
    "capstone": {
        "test_curves": 3,
        "test_clip": 2,
        "test_kept": 2,
        "test_target": 2,
        "test_resume": 3,
    },
    "fsdp2": {
        "test_parity": 3,
        "test_memory": 2,
        "test_traffic": 2,
        "test_prefetch": 2,
        "test_checkpoint": 3,
    },
    "bug_zoo": {"test_skip": 2, "test_uneven": 2, "test_replicas": 2},
    "zeropp": {
        "test_bytes": 2,
        "test_quantizer": 2,
        "test_gather_bytes": 2,
        "test_gather": 2,
        "test_gather_group": 1,
        "test_node": 1,
        "test_secondary": 2,
        "test_backward": 2,
        "test_train": 2,
    },
}

WRITTEN = {
    "fsdp2": ["tradeoff_answer"],
    "bug_zoo": ["diagnosis_skip", "diagnosis_uneven", "diagnosis_replicas"],
}  # answers the instructor grades by hand


def capstone_with_the_course_ddp() -> str:
    """The capstone's reference, its DDP replaced by the course's, loaded from zerobook/data_parallel/ddp.py
    by path under another name (issue 41: it scored 12/12; the file is hidden while graded)."""
    from pathlib import Path

    from conftest import ROOT

    from zerobook.grading import reference_script

    script = reference_script(ROOT / "labs", "capstone").replace(
        "class BucketedDDP:", "class _Mine:", 1
    )
    tests = Path(__file__).parent / "forgeries" / "course_ddp_by_path.py"
    return script + "\n\n" + tests.read_text()


# attacks graded in the round trip of their lab, whose reference is timed there already:
# lab -> (student, its rank script, what its feedback says)
ATTACKS = {
    "capstone": (
        "course_ddp_by_path",
        capstone_with_the_course_ddp,
        "importlib.util is not a module this lab's file may import",
    )
}


def with_attack(lab):
    """reference_and_release, plus the lab's attacker (ATTACKS) if it has one."""
    from test_hostile import edit

    plain = reference_and_release([lab])
    if lab not in ATTACKS:
        return plain
    student, script, _ = ATTACKS[lab]
    first = lambda s: s.split("\n", 1)[0] + "\n" + script()
    return lambda root: {
        lab: {**plain(root)[lab], student: edit(source(lab), "rank_script", first)}
    }


@pytest.mark.parametrize("lab", sorted(POINTS))
def test_reference_scores_full_marks_and_the_release_zero(tmp_path, lab):
    # the capstone's reference trains 800 steps: its three submissions took 752 s to grade in
    # CI (stop 57) and over 900 s on a busy 2-core machine
    round_trip(
        tmp_path, with_attack(lab), [lab], timeout=1800 if lab == "capstone" else 900
    )
    scores = part_scores(tmp_path, lab, POINTS[lab])
    assert scores["reference"] == POINTS[lab]
    assert scores["untouched"] == {part: 0 for part in POINTS[lab]}
    if lab in ATTACKS:
        student, _, says = ATTACKS[lab]
        assert scores[student] == {part: 0 for part in POINTS[lab]}
        page = (tmp_path / "feedback" / student / lab / f"{lab}.html").read_text()
        assert says in page
    page = (tmp_path / "feedback" / "reference" / lab / f"{lab}.html").read_text()
    assert "hostname of the client socket" not in page  # gloo's noise in the sandbox
    # a written answer waits for the instructor; one left blank scores 0 at once
    if lab in WRITTEN:
        written = written_answers(tmp_path, lab, WRITTEN[lab])
        assert written["reference"] == {name: (None, True) for name in WRITTEN[lab]}
        assert written["untouched"] == {name: (0, False) for name in WRITTEN[lab]}
        assert_awaiting_labelled(tmp_path, lab, WRITTEN[lab])


def assert_awaiting_labelled(root, lab, names):
    """The reference's answers, waiting for the instructor, are labelled so in its feedback and in
    grades.csv; the untouched release's, scored 0 at once, are not."""
    import csv

    from zerobook.classroom.feedback import AWAITING

    rows = {
        r["student_id"]: r
        for r in csv.DictReader((root / "grades.csv").open())
        if r["assignment"] == lab
    }
    assert all(name in rows["reference"][AWAITING] for name in names), rows["reference"]
    assert rows["untouched"][AWAITING] == ""
    page = (root / "feedback" / "reference" / lab / f"{lab}.html").read_text()
    assert all(
        f'<a href="#{name}">Written response</a> (Score: 0.0 / ' in page
        for name in names
    )
    assert (
        page.count(AWAITING) >= 2 * len(names) + 1
    )  # listed, at the answer, in the total


def with_rank_script(lab: str, script: str) -> str:
    """Lab `lab`'s instructor notebook with `script` as the student's file."""
    import json

    notebook = json.loads(source(lab))
    cell = next(
        c
        for c in notebook["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "rank_script"
    )
    cell["source"] = f"%%writefile {lab}_student.py\n" + script
    return json.dumps(notebook)


def test_ddp_a_wrong_design_loses_its_part_and_a_borrowed_ddp_scores_zero(tmp_path):
    """Lab 2 graded as a class: buckets planned from model.parameters() (the package's design)
    lose the bucket points only, with feedback naming the bucket; a file that imports
    zerobook.data_parallel.ddp scores 0 on every part, its feedback saying why."""
    import json

    from test_lab_ddp import PLANNED_BUCKETS

    reference = "".join(
        next(
            c["source"]
            for c in json.loads(source("ddp"))["cells"]
            if c["metadata"].get("nbgrader", {}).get("grade_id") == "rank_script"
        )
    )
    borrows = reference.split("\n", 1)[1].replace(
        "import torch\n",
        "import torch\nfrom zerobook.data_parallel.ddp import OverlappedAllReduce\n",
        1,
    )
    round_trip(
        tmp_path,
        lambda root: {
            "ddp": {
                "planned": with_rank_script("ddp", PLANNED_BUCKETS),
                "borrows": with_rank_script("ddp", borrows),
            }
        },
        ["ddp"],
    )
    scores = part_scores(tmp_path, "ddp", POINTS["ddp"])
    assert scores["planned"] == {**POINTS["ddp"], "test_buckets": 0}
    assert scores["borrows"] == {part: 0 for part in POINTS["ddp"]}
    page = lambda student: (
        tmp_path / "feedback" / student / "ddp" / "ddp.html"
    ).read_text()
    assert "the same gradients in another order" in page("planned")
    refused = "zerobook.data_parallel.ddp is not a module this lab's file may import"
    assert refused in html.unescape(page("borrows"))


def test_a_private_copy_of_the_labs_grades_with_parameters_students_never_saw(tmp_path):
    """`make grade LABS=private`: Lab 2 from an instructor's copy of labs/ whose
    hidden_params.json gives the harness another cap and seed; it is not released, the
    reference still scores full marks, and the run used the instructor's cap: a DDP with the
    public cap written in loses its buckets (the feedback no longer shows the kernel's output
    after the hidden tests, so the run's cap is read from what it did)."""
    import json
    import shutil

    from conftest import ROOT

    private = tmp_path / "private-labs"
    shutil.copytree(
        ROOT / "labs" / "ddp",
        private / "ddp",
        ignore=shutil.ignore_patterns("*_student.py", "__pycache__"),
    )
    shutil.copy(ROOT / "labs" / "nbgrader_config.py", private)
    (private / "ddp" / "hidden_params.json").write_text(
        json.dumps({"bucket_cap_bytes": 40960, "seed": 99})
    )
    root = tmp_path / "course"
    from test_hostile import edit

    public = lambda text: text.replace(
        "self.cap = bucket_cap_bytes", "self.cap = 32 * 1024"
    )
    students = {
        "reference": source("ddp"),
        "public_cap": edit(source("ddp"), "rank_script", public),
    }
    round_trip(root, lambda r: {"ddp": students}, ["ddp"], labs_dir=private)
    assert not list((root / "release" / "ddp").glob("hidden_params*"))
    scores = part_scores(root, "ddp", POINTS["ddp"])
    assert scores["reference"] == POINTS["ddp"]
    assert scores["public_cap"]["test_buckets"] == 0, scores["public_cap"]
