"""Careless mistakes, graded as a class (issue 42): each submission is the reference with one
realistic mistake, graded sandboxed (`python -m zerobook.classroom grade --jobs 2`) beside the
reference, which keeps full marks in the same run. Each loses the parts whose property it
breaks, keeps the others (a crash keeps what the steps before it showed: zerobook.labs.crash),
and its feedback page names it in words a student can act on; none ends in a SIGSEGV
(zerobook.labs.freed) or in the grader's own frames.

CORPUS[lab][student] = (the (old, new) replacements, the parts it loses, the words its
feedback shows): tests/careless/LAB.py's CLASS, one module a lab. The parts not lost keep
their points.
"""

import os
from importlib import import_module
from pathlib import Path

import pytest

from test_forgery import class_of, outcome, reference, replaced
from test_capstone_lab import SHORT
from test_grading_labs import POINTS
from test_hostile import POINTS as SETUP_POINTS, graded_class

pytestmark = [pytest.mark.slow]
POINTS = {**POINTS, "setup_check": SETUP_POINTS}  # Lab 0's: graded in test_hostile

LABS = sorted(
    p.stem
    for p in (Path(__file__).parent / "careless").glob("*.py")
    if p.stem not in ("__init__", "common")
)
CORPUS = {lab: import_module(f"careless.{lab}").CLASS for lab in LABS}
# CARELESS_ONLY=name,name grades only those students (and the reference): while a mistake's
# words are being written, a class's run costs minutes.
ONLY = {s for s in os.environ.get("CARELESS_ONLY", "").split(",") if s}
# The capstone's and the bug zoo's classes leave the reference out: their full marks are
# graded on their own (test_grading_labs; the capstone on the full schedule), and one more
# submission of either costs minutes (the bug zoo's: ~100 s, 2.5x its reference's launches).
BESIDE = sorted(set(CORPUS) - {"capstone", "bug_zoo"})
# The capstone's class is graded from an instructor's copy of labs/ whose hidden parameters
# shorten its runs (tests/test_capstone_lab.SHORT: 40 steps, not 600; ~1/6 of the CPU).
# Its target is not compared: the reference reaches it only near the full schedule
# (measured: 4.26 bits/byte after 100 steps, 3.74 after 200, bigram 3.46).
SCHEDULES = {"capstone": SHORT}
# lost in every short run, graded in the full one (test_grading_labs)
UNCOMPARED = {"capstone": {"test_target"}}
# So the grader, which times the reference before grading and refuses one that fails its
# own tests, finds the lab's limits already measured (generous: no mistake here is slow).
MEASURED = {"capstone": dict(reference_s=0, part_s=600, cell_s=1230, submission_s=2430)}


def private_labs(lab: str, folder):
    """An instructor's copy of labs/ holding `lab`, its hidden parameters SCHEDULES[lab]."""
    import json
    import shutil

    from conftest import ROOT

    shutil.copytree(
        ROOT / "labs" / lab,
        folder / lab,
        ignore=shutil.ignore_patterns("*_student.py", "__pycache__"),
    )
    shutil.copy(ROOT / "labs" / "nbgrader_config.py", folder)
    (folder / lab / "hidden_params.json").write_text(json.dumps(SCHEDULES[lab]))
    return folder


def careless(lab: str, pairs: tuple) -> str:
    """The instructor's notebook with each (old, new) pair replaced once: in the rank
    script where `old` is there, else in the one solution cell that holds it (Labs 0 and
    1 grade functions written in cells of their own)."""
    import json

    script, rest = reference(lab), []
    for old, new in zip(pairs[::2], pairs[1::2]):
        if old in script:
            script = replaced(script, old, new)
        else:
            rest += [old, new]
    notebook = json.loads(class_of(lab, {"s": script})["s"])
    for old, new in zip(rest[::2], rest[1::2]):
        cells = [
            c
            for c in notebook["cells"]
            if c["metadata"].get("nbgrader", {}).get("solution")
            and old in "".join(c["source"])
        ]
        assert len(cells) == 1, f"{old!r} is in {len(cells)} solution cells of {lab}"
        cells[0]["source"] = replaced("".join(cells[0]["source"]), old, new)
    return json.dumps(notebook)


def labs(names):
    """One worker grades each class, for every test of it (make test-grading: loadgroup)."""
    return [
        pytest.param(lab, marks=pytest.mark.xdist_group(f"careless_{lab}"))
        for lab in names
    ]


def why(page: str) -> str:
    """The page's lines that say why a run failed (a CI log shows no page): at most five."""
    said = [
        line.strip()[:300]
        for line in page.splitlines()
        if any(w in line for w in ("longer than", "not checked", "killed", "Error:"))
        and "{" not in line  # the page's style sheet
    ]
    return "the page says: " + " | ".join(said[:5]) if said else "the page says nothing"


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """One grading run of a lab's careless class, the reference among them (BESIDE)."""
    lab = request.param
    students = {
        name: pairs
        for name, (pairs, _, _) in CORPUS[lab].items()
        if not ONLY or name in ONLY
    }
    notebooks = {"reference": class_of(lab, {})["reference"]}
    notebooks.update({name: careless(lab, pairs) for name, pairs in students.items()})
    if lab not in BESIDE:
        del notebooks["reference"]
    labs = None
    if lab in SCHEDULES:
        labs = private_labs(lab, tmp_path_factory.mktemp(f"private_{lab}"))
    limits = MEASURED.get(lab)
    return lab, graded_class(
        tmp_path_factory, lab, notebooks, POINTS[lab], labs=labs, limits=limits
    )


@pytest.mark.parametrize("graded", labs(BESIDE), indirect=True)
def test_the_reference_keeps_full_marks_beside_the_careless(graded):
    lab, run = graded
    scores, _, _ = outcome(run, "reference")
    assert scores == POINTS[lab], scores


@pytest.mark.parametrize("graded", labs(sorted(CORPUS)), indirect=True)
def test_each_mistake_loses_its_parts_keeps_the_rest_and_is_named(graded):
    """Every student of the class at once: the first that differs is named."""
    lab, run = graded
    wrong = []
    for student, (_, loses, words) in CORPUS[lab].items():
        if ONLY and student not in ONLY:
            continue
        scores, page, _ = outcome(run, student)
        lost = set(POINTS[lab]) if loses == "all" else loses
        compared = set(POINTS[lab]) - UNCOMPARED.get(lab, set())
        want = {
            part: 0 if part in lost else points
            for part, points in POINTS[lab].items()
            if part in compared
        }
        scores = {part: s for part, s in scores.items() if part in compared}
        if scores != want:
            wrong.append(f"{student}: scored {scores}, expected {want}; {why(page)}")
        wrong += [
            f"{student}: the feedback does not say {w!r}; {why(page)}"
            for w in words
            if w not in page
        ]
        for bad in ("Segmentation fault", "SIGSEGV", "site-packages", "/work/"):
            if bad in page:
                wrong.append(f"{student}: the feedback shows {bad!r}")
    assert not wrong, "\n".join(wrong)
