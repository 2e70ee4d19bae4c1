"""Every lab's harness against wrong student code: a graded function taken from the course,
an untouched release, a run that fails; each lab's own: tests/test_lab_<lab>.py."""

import time
from pathlib import Path

import pytest

import zerobook as zb
from lab_helpers import lab_solution, planted, released_rank_script

# starts ranks with torchrun (make test-quick leaves it out)
pytestmark = pytest.mark.launch


# lab -> (part, a file taking the graded idea from the course, the module it names)
BORROWED = {
    "ring_allreduce": (
        "bytes",
        "from zerobook.data_parallel.collectives import ring_all_reduce\n",
        "zerobook.data_parallel.collectives",
    ),
    "fsdp2": (
        "checkpoint",
        "from zerobook.train.sharded_checkpoint import save\n",
        "zerobook.train.sharded_checkpoint",
    ),
    "memory": (
        "fp32",
        "from zerobook import measure\n",
        "zerobook",
    ),
}


@pytest.mark.parametrize("lab", sorted(BORROWED))
def test_a_graded_function_taken_from_the_course_fails_its_part_saying_so(
    tmp_path, lab
):
    """The lab's rules (zerobook.trust.policy) refuse the import before a line runs: the
    launch fails naming the line and the module, and what the file may import."""
    part, borrowing, module = BORROWED[lab]
    student = tmp_path / f"{lab}_student.py"
    # defined last: the borrowed one would count (debug=False: Lab 1's DDP crashes under it)
    student.write_text(lab_solution(lab) + "\n\n" + borrowing)
    with pytest.raises(zb.LaunchError, match="PolicyViolation") as caught:
        zb.grading.run_part(lab, str(student), part, nproc=2, echo=False, debug=False)
    said = str(caught.value)
    assert (
        f"`{borrowing.strip()}`: {module} is not a module this lab's file may import"
        in said
    )
    assert "this lab's file may import collections" in said


FORGERIES = Path(__file__).parent / "forgeries"


@pytest.mark.parametrize(
    "forgery, says",
    [
        ("measure_from_closure", ".__closure__ is a library's or the grader's inside"),
        ("measure_from_text", "code is not a module this lab's file may import"),
    ],
)
def test_a_withheld_function_taken_back_is_refused_before_it_runs(
    tmp_path, forgery, says
):
    """The red team's ways to the course's byte counter (its guard's closure; its source
    compiled again) need names the rules refuse: the file never runs."""
    student = tmp_path / "memory_student.py"
    student.write_text((FORGERIES / f"{forgery}.py").read_text())
    with pytest.raises(zb.LaunchError, match="PolicyViolation") as caught:
        zb.grading.run_part(
            "memory", str(student), "fp32", nproc=2, echo=False, debug=False
        )
    assert says in str(caught.value)


def test_an_untouched_student_file_fails_at_once_without_launching(tmp_path):
    stub = tmp_path / "fsdp2_student.py"
    stub.write_text(
        'def shard(model, mesh):\n    """doc"""\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\n'
        "def load(model, optimizer, path):\n    raise NotImplementedError()\n"
    )
    start = time.monotonic()
    with pytest.raises(
        NotImplementedError, match="no function is implemented yet .shard, load"
    ):
        zb.grading.run_part("fsdp2", str(stub), "parity", nproc=2)
    assert time.monotonic() - start < 1
    partial = tmp_path / "partial.py"
    partial.write_text(
        "def shard(model, mesh):\n    return model\n\ndef load(m, o, p):\n    raise NotImplementedError()\n"
    )
    # launched: the parts that need shard() still score
    assert zb.grading.unimplemented(str(partial)) == ["load"]


@pytest.mark.parametrize(
    "lab",
    [
        "setup_check",
        "memory",
        "ddp",
        "ring_allreduce",
        "zero",
        "zero3",
        "fsdp2",
        "capstone",
        "bug_zoo",
        "zeropp",
    ],
)
def test_every_part_of_an_untouched_release_scores_nothing_and_launches_nothing(
    tmp_path, lab
):
    """The blank release of each lab, on its harness: every graded part fails at once (the
    reference with its hidden tests runs under nbval over labs/; the round trip in make test-all)."""
    import importlib

    student = tmp_path / f"{lab}_student.py"
    student.write_text(released_rank_script(lab))
    assert "BEGIN SOLUTION" not in student.read_text()
    for part in importlib.import_module(f"zerobook.labs.{lab}").PARTS:
        start = time.monotonic()
        with pytest.raises(NotImplementedError, match="no function is implemented yet"):
            zb.grading.run_part(lab, str(student), part, nproc=2)
        assert time.monotonic() - start < 1, (lab, part)


def test_each_lab_shows_the_harness_lines_that_run_the_students_file():
    """zb.grading.harness_source reads the trusted harness as text (no torch in the notebook)."""
    import json
    import re

    from conftest import ROOT

    source = zb.grading.harness_source("zero", "Arrivals", "build", "train")
    assert (
        source.startswith("class Arrivals:")
        and "def train(student, name: str" in source
    )
    assert '"Zero2", *args)' in source and 'call_student(zero, "finish")' in source
    # Lab 5's cell shows these
    source = zb.grading.harness_source("zero3", "Watch", "train")
    assert source.startswith("class Watch:") and 'call_student(make, "Zero3"' in source
    with pytest.raises(KeyError, match="defines no nothing_here"):
        zb.grading.harness_source("zero", "nothing_here")
    for path in sorted((ROOT / "labs").glob("*/*.ipynb")):
        shown = [
            c
            for c in json.loads(path.read_text())["cells"]
            if re.match(
                r'print\(zb\.grading\.harness_source\("' + path.stem + '"',
                "".join(c["source"]),
            )
        ]
        assert len(shown) == 1, path.name


def test_a_lab_whose_run_fails_leads_its_error_with_the_students_line(tmp_path):
    """Lab 3 runs no steps of its own: a crash fails the launch, and the failure's first
    line is the student's (file, line, function, source), then the case it failed on
    (its size against N) and the error."""
    line = "        buffer = incoming[: parts[recv].numel()]\n"
    student = planted(
        tmp_path,
        "ring_allreduce",
        "reshaped",
        line,
        line.replace("numel()]", "numel()].view(2, -1)"),
    )
    with pytest.raises(zb.LaunchError) as caught:
        zb.grading.run_part("ring_allreduce", student, "correct", nproc=3, echo=False)
    first = str(caught.value).splitlines()[0]
    assert "failed: ring_allreduce_student.py, line " in first, first
    assert "in ring_all_reduce: `buffer = incoming[" in first, first
    assert (
        "RuntimeError: on a tensor of 1 float32 element, N = 3 (shorter than N" in first
    )
    assert "shape '[2, -1]' is invalid" in first, first


def test_lab_9s_text_gives_the_sizes_its_harness_uses():
    """Lab 9's notebook states the quantizer's and the pieces' sizes, the ranks and the steps:
    each one as zerobook.labs.zeropp has it (its defaults; an instructor's hidden block or seed
    is the lab's to state)."""
    import json

    from conftest import ROOT
    from zerobook.labs import zeropp as harness

    cells = json.loads((ROOT / "labs" / "zeropp" / "zeropp.ipynb").read_text())["cells"]
    markdown = "".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
    )
    text = " ".join(markdown.split())
    size, block, node = harness.SIZE, harness.BLOCK, harness.NODE
    blocks, world = -(-size // block), 2 * node
    full = size * world
    for said in (
        f"{size:,} float32 values in blocks of {block}: int8 codes for the "
        f"{blocks * block:,} padded elements, {blocks} float32 scales",
        f"bf16 shard of {size:,} elements, gathered over all {world} ranks",
        f"$b = \\lceil {size} / B \\rceil$ blocks, where bf16 would move $N \\cdot {2 * size}$",
        f"the full weights (bf16, {full:,} elements), the harness's own node group of "
        + {2: "two"}[node],
        f"rank 0 keeps elements 0 to {full // node - 1:,}",
        f"each in {2 * full // node:,} bytes of storage",
        f"moving the full weights' {2 * full:,} bytes",
        f"for {harness.STEPS} steps",
    ):
        assert said in text, said


SKIPS_THE_COLLECTIVES = '''
import socket

import torch.distributed as dist


def all_reduce_contributions(rank, device):
    """The total every rank would hold, computed here: no collective."""
    n = dist.get_world_size()
    return float(n * (n + 1) // 2)


def gather_what_each_rank_sees(backend, device):
    """Every rank as this one imagines it: no collective."""
    host = socket.gethostname()
    return [
        {"rank": r, "backend": backend, "device": device, "host": host}
        for r in range(dist.get_world_size())
    ]
'''


def test_lab_0_cannot_be_passed_without_its_collectives(tmp_path):
    """Issue 64's red team scored 5/5 with no collective: a rank can compute rank + 1's total,
    and on one host every rank's entry. Each function is called again with what only its rank
    knows (a secret contribution, a secret host name): only the collective gets them all."""
    student = tmp_path / "setup_check_student.py"
    student.write_text(SKIPS_THE_COLLECTIVES)
    run = zb.grading.run_part("setup_check", str(student), "all_reduce", nproc=3)
    assert [r["total"] for r in run.ranks] == [6.0] * 3  # the visible total: right
    assert all(r["secret_total"] != r["secret_truth"] for r in run.ranks)
    run = zb.grading.run_part("setup_check", str(student), "gather", nproc=3)
    assert all(r["seen"] == [t["truth"] for t in run.ranks] for r in run.ranks)
    for rank, report in enumerate(run.ranks):
        hosts, truth = report["secret_hosts"], report["secret_truth"]
        assert hosts[rank] == truth[rank] and hosts != truth  # its own host only
    student.write_text(lab_solution("setup_check"))
    run = zb.grading.run_part("setup_check", str(student), "all_reduce", nproc=3)
    assert all(r["secret_total"] == r["secret_truth"] for r in run.ranks)


def test_a_cell_left_out_of_grading_binds_nothing_a_later_cell_reads():
    """A course cell tagged NOT_GRADED (it only shows what the student's file does, as Lab 8's
    run of the broken loops) is left out of the clean run: no later cell may read a name it
    binds, or a test would read what grading never made."""
    import ast
    import json

    from zerobook.classroom.clean_score import cells_of

    left_out = 0
    for path in sorted(Path(zb.__file__).parents[1].glob("labs/*/*.ipynb")):
        cells = cells_of(json.loads(path.read_text()))
        for at, (kind, _, source) in enumerate(cells):
            if kind != "shown":
                continue
            left_out += 1
            tree = ast.parse(source)
            later = "\n".join(s for k, _, s in cells[at + 1 :] if not s.startswith("%"))
            read = {
                n.id
                for n in ast.walk(ast.parse(later))
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            }
            stored = {
                n.id
                for n in ast.walk(tree)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            assert not (stored & read), (path.name, source[:60], stored & read)
    assert left_out >= 1  # Lab 8's run of the broken loops
