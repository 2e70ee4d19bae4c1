"""What a hostile class tried on the labs' records and on the course's own implementations
(issue 41, §2 and §3), graded as a class (`python -m zerobook.classroom grade --jobs 2`) beside
the reference, which keeps full marks in the same run. Each attack scores 0 on what it forges,
saying why, and the classroom's review flags its means for the instructor.

- Records rewritten in the rank's own process (tests/forgeries/): the in-flight record reached
  as `dist.all_reduce.__self__` or through gc and rewritten (the process group's own count of
  its collectives disagrees: zerobook.data_parallel.inflight); `torch.Tensor.abs` answering
  zeros (refused when written: the class is the whole process's, zerobook.trust.restricted),
  or one tensor's `.abs` (refused when it runs: a library's method hidden on an object); a
  process forked at import to rewrite the reports (a graded rank cannot start one: zerobook.trust.graded_rank); gradients or full units kept in
  module-level state or on torch's objects (a module of the student's: counted,
  zerobook.labs.student_state.tensors, which follows every reference Python keeps: a
  generator's locals too).
- Borrowed implementations: PyTorch's DDP and its reducer, the course's DDP loaded from its file
  or run from its text, the import guard taken off sys.meta_path, a withheld function's
  original taken from its guard's closure. Each now meets the lab's rules (zerobook.trust.policy:
  the module, name or attribute it needs is refused by name before the file runs).
Lab 0's attacks on the trusted side are tests/test_hostile.py's; the capstone's DDP loaded by
path is in tests/test_grading_labs.py's round trip (its reference is timed there already).
"""

import re
from pathlib import Path

import pytest

from conftest import ROOT
from test_grading_labs import POINTS
from test_hostile import edit, feedback_page, graded_class

pytestmark = [pytest.mark.slow]
FORGERIES = Path(__file__).parent / "forgeries"


def forgery(*names: str) -> str:
    """The files of tests/forgeries/ named, one after the other (a script and its tail)."""
    return "\n\n".join((FORGERIES / f"{name}.py").read_text() for name in names)


def reference(lab: str) -> str:
    from zerobook.grading import reference_script

    return reference_script(ROOT / "labs", lab)


def replaced(text: str, *pairs: str) -> str:
    """`text` with each (old, new) pair replaced; each old must occur once."""
    for old, new in zip(pairs[::2], pairs[1::2]):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def class_of(lab: str, scripts: dict[str, str]) -> dict[str, str]:
    """The instructor's notebook ("reference") and, for each attacker, its rank script
    in the rank-script cell."""
    from grading_helpers import source

    notebook = source(lab)
    script = lambda code: edit(
        notebook, "rank_script", lambda s: s.split("\n", 1)[0] + "\n" + code
    )
    return {
        "reference": notebook,
        **{name: script(code) for name, code in scripts.items()},
    }


def outcome(graded, student: str) -> tuple[dict, str, list[str]]:
    """(scores by part, the feedback page's text, the instructor's flags) of one student."""
    root, done, scores = graded
    lab = next(p.name for p in (root / "submitted" / student).iterdir())
    flags = re.findall(rf"^FLAGGED: {student} / {lab}: (.*)$", done.stdout, re.M)
    return scores[student], feedback_page(root, student, lab), flags


def zero_saying(graded, lab: str, student: str, says: str, flagged: str | None) -> None:
    """Every part 0, the feedback naming why, the review's flag naming the means."""
    scores, page, flags = outcome(graded, student)
    assert scores == dict.fromkeys(POINTS[lab], 0), (student, scores)
    assert says in page, (student, page[-3000:])
    if flagged:
        assert any(flagged in f for f in flags), (student, flags)


def lazy(attack: str) -> str:
    return forgery("lazy_ddp", attack)


DDP = {  # student -> (script, what the feedback says, what the review flags)
    "record_rewritten": (
        forgery("record_rewritten"),
        ".__self__ is a library's or the grader's inside",
        "__self__",
    ),
    "record_rewritten_counts_kept": (
        forgery("record_rewritten_counts_kept"),
        ".__reduce__ is a library's or the grader's inside",
        "__reduce__",
    ),
    "abs_returns_zeros": (
        lazy("abs_returns_zeros"),
        "changes an attribute of the class Tensor, which the whole process shares",
        "torch.Tensor.abs",
    ),
    "tensor_method_shadowed": (
        forgery("tensor_method_shadowed"),
        "replaces the method abs on a Parameter, which the grader calls too",
        "shadows a tensor method",
    ),
    "fork_rewrites_reports": (
        lazy("fork_rewrites_reports"),
        "os is not a module this lab's file may import",
        "os.fork",
    ),
    "torch_ddp": (
        forgery("torch_ddp"),
        "torch.nn.parallel is not a module this lab's file may import",
        "DistributedDataParallel",
    ),
    "torch_reducer": (
        forgery("torch_reducer"),
        "torch.distributed.Reducer is not a name this lab's file may use",
        "Reducer",
    ),
    "course_ddp_by_path": (
        forgery("course_ddp_by_path"),
        "importlib.util is not a module this lab's file may import",
        "spec_from_file_location",
    ),
    "course_ddp_exec": (
        forgery("course_ddp_exec"),
        "zerobook is not a module this lab's file may import",
        "exec",
    ),
}


@pytest.fixture(scope="module")
def graded_ddp(tmp_path_factory):
    scripts = {name: script for name, (script, _, _) in DDP.items()}
    return graded_class(
        tmp_path_factory, "ddp", class_of("ddp", scripts), POINTS["ddp"]
    )


@pytest.mark.xdist_group("forgery_ddp")
def test_lab2_the_reference_keeps_full_marks_unflagged(graded_ddp):
    scores, _, flags = outcome(graded_ddp, "reference")
    assert scores == POINTS["ddp"] and not flags, (scores, flags)


@pytest.mark.xdist_group("forgery_ddp")
@pytest.mark.parametrize("student", sorted(DDP))
def test_lab2_a_forged_record_or_a_borrowed_ddp_scores_zero_and_is_flagged(
    graded_ddp, student
):
    _, says, flagged = DDP[student]
    zero_saying(graded_ddp, "ddp", student, says, flagged)


def zero1_posing_as_zero2() -> str:
    """Lab 4's reference made a ZeRO-1 (every bucket kept, whole, until finish()), which then
    rewrites the grader's record to look like ZeRO-2's."""
    keep = "            self.closed.append((self.bucket, self.bucket_bytes))\n"
    script = replaced(
        reference("zero"),
        "        if self.bucket_bytes >= self.cap:\n            self.launch()\n",
        "        if self.bucket_bytes >= self.cap:\n" + keep
        + "            self.bucket, self.bucket_bytes = [], 0\n",
        "        if self.bucket:\n            self.launch()\n        while self.in_flight:",
        "        if self.bucket:\n" + keep
        + "        for self.bucket, self.bucket_bytes in self.closed:\n"
        "            self.launch()\n        self.closed = []\n        while self.in_flight:",
        "        self.max_in_flight = max_in_flight\n",
        "        self.max_in_flight = max_in_flight\n        self.closed = []\n",
        "            self.retire()\n        ### END SOLUTION",
        "            self.retire()\n        _pose_as_zero2()\n        ### END SOLUTION",
    )  # fmt: skip
    return script + "\n\n" + forgery("pose_as_zero2")


def keeps_every_gradient() -> str:
    """Lab 4's reference, with every whole gradient kept in a module-level list."""
    return replaced(
        reference("zero"),
        "import torch.distributed as dist\n",
        "import torch.distributed as dist\n\nKEPT = []\n",
        "        grad = padded(param.grad, self.n)\n",
        "        KEPT.append(param.grad)\n        grad = padded(param.grad, self.n)\n",
    )


def keeps_every_gradient_on_a_module() -> str:
    """Lab 4's reference, with every whole gradient kept on a torch.nn.Module of its own (the
    walk of what the student holds used to stop at modules and optimizers)."""
    return replaced(
        reference("zero"),
        "        self.max_in_flight = max_in_flight\n",
        "        self.max_in_flight = max_in_flight\n        self.shelf = torch.nn.Module()\n"
        "        self.shelf.grads = []\n",
        "        grad = padded(param.grad, self.n)\n",
        "        self.shelf.grads.append(param.grad)\n        grad = padded(param.grad, self.n)\n",
    )


def keeps_every_gradient_in_a_generator() -> str:
    """Lab 4's reference, with every whole gradient sent into a suspended generator of its own
    (its locals: no attribute names them; the walk of what the student holds used to follow
    attributes and containers only)."""
    return replaced(
        reference("zero"),
        "import torch.distributed as dist\n",
        "import torch.distributed as dist\n\n\ndef shelf():\n    kept = []\n"
        "    while True:\n        kept.append((yield))\n",
        "        self.max_in_flight = max_in_flight\n",
        "        self.max_in_flight = max_in_flight\n        self.shelf = shelf()\n"
        "        next(self.shelf)\n",
        "        grad = padded(param.grad, self.n)\n",
        "        self.shelf.send(param.grad)\n        grad = padded(param.grad, self.n)\n",
    )


DECAY_ON_1D = (
    '[{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]',
    '[{"params": decay + no_decay}]',
)


@pytest.fixture(scope="module")
def graded_zero(tmp_path_factory):
    scripts = {
        "zero1_posing_as_zero2": zero1_posing_as_zero2(),
        "keeps_every_gradient": keeps_every_gradient(),
        "buffers_in_a_callable": forgery("zero_buffers_in_a_callable"),
        "gradients_on_a_module": keeps_every_gradient_on_a_module(),
        "gradients_in_a_generator": keeps_every_gradient_in_a_generator(),
        "abs_returns_zeros": replaced(reference("zero"), *DECAY_ON_1D)
        + "\n\n"
        + forgery("abs_returns_zeros"),
    }
    return graded_class(
        tmp_path_factory, "zero", class_of("zero", scripts), POINTS["zero"]
    )


@pytest.mark.xdist_group("forgery_zero")
def test_lab4_forged_records_and_hidden_gradients_lose_what_they_forge(graded_zero):
    scores, _, flags = outcome(graded_zero, "reference")
    assert scores == POINTS["zero"] and not flags, (scores, flags)
    zero_saying(
        graded_zero,
        "zero",
        "zero1_posing_as_zero2",
        "gc is not a module this lab's file may import",
        "gc.get_objects",
    )
    zero_saying(
        graded_zero,
        "zero",
        "abs_returns_zeros",
        "an attribute of the class Tensor",
        "torch.Tensor.abs",
    )
    hidden = ("keeps_every_gradient", "buffers_in_a_callable", "gradients_on_a_module",
              "gradients_in_a_generator")  # fmt: skip
    for student in hidden:  # kept where no one should look: counted
        scores, page, _ = outcome(graded_zero, student)
        assert scores == {**POINTS["zero"], "test_held": 0}, (student, scores)
        assert "bytes of gradients held" in page


def no_prefetch_rewritten(
    tail: str = "rewrite_at_last_gradient", call="_rewrite_record"
) -> str:
    """Lab 5's reference without prefetch, its record rewritten at each step's last gradient
    (`tail`'s function `call`)."""
    script = replaced(
        reference("zero3"),
        "        self.wait(self.order[i])\n        if i + 1 < len(self.order):\n"
        "            self.gather(self.order[i + 1], async_op=True)\n",
        "        self.wait(self.order[i])\n",
        "        following = len(self.order) - 1 if i == 0 else i - 1\n"
        "        if following > 0:\n            self.gather(self.order[following], async_op=True)\n",
        "",
        "        self.free(unit)\n        ### END SOLUTION",
        "        self.free(unit)\n        self.units_done = getattr(self, 'units_done', 0) + 1\n"
        "        if self.units_done == len(self.params):\n            self.units_done = 0\n"
        f"            {call}()\n        ### END SOLUTION",
    )  # fmt: skip
    return script + "\n\n" + forgery(tail)


def keeps_every_unit() -> str:
    """Lab 5's reference, with a full copy of every unit's weights kept in a module dict."""
    return replaced(
        reference("zero3"),
        "import torch.nn.functional as F\n",
        "import torch.nn.functional as F\n\nCOPIES = {}\n",
        "            offset += n\n",
        "            offset += n\n            COPIES[id(p)] = p.detach().clone()\n",
    )


@pytest.fixture(scope="module")
def graded_zero3(tmp_path_factory):
    decay = (
        '[{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], **options',
        '[{"params": decay + no_decay}], **options',
    )
    scripts = {
        "no_prefetch_rewritten": no_prefetch_rewritten(),
        "counts_kept": no_prefetch_rewritten(
            "counts_kept_at_last_gradient", "_tidy_log"
        ),
        "keeps_every_unit": keeps_every_unit(),
        "gathered_in_a_rebound_global": forgery("zero3_gathered_in_a_rebound_global"),
        "gathered_as_a_subclass": forgery("zero3_gathered_as_a_subclass"),
        "import_guard_removed": forgery("import_guard_removed"),
        "abs_returns_zeros": replaced(reference("zero3"), *decay)
        + "\n\n"
        + forgery("abs_returns_zeros"),
    }
    return graded_class(
        tmp_path_factory, "zero3", class_of("zero3", scripts), POINTS["zero3"]
    )


@pytest.mark.xdist_group("forgery_zero3")
def test_lab5_forged_records_borrowed_zero3_and_hidden_units_lose_what_they_forge(
    graded_zero3,
):
    scores, _, flags = outcome(graded_zero3, "reference")
    assert scores == POINTS["zero3"] and not flags, (scores, flags)
    refused = "gc is not a module this lab's file may import"
    zero_saying(
        graded_zero3, "zero3", "no_prefetch_rewritten", refused, "gc.get_objects"
    )
    inside = ".__reduce__ is a library's or the grader's inside"
    zero_saying(graded_zero3, "zero3", "counts_kept", inside, "__reduce__")
    zero_saying(
        graded_zero3,
        "zero3",
        "abs_returns_zeros",
        "an attribute of the class Tensor",
        "torch.Tensor.abs",
    )
    zero_saying(
        graded_zero3,
        "zero3",
        "import_guard_removed",
        "sys is not a module this lab's file may import",
        "sys.meta_path",
    )
    hiders = (
        "keeps_every_unit",
        "gathered_in_a_rebound_global",
        "gathered_as_a_subclass",
    )
    for student in hiders:
        scores, page, _ = outcome(graded_zero3, student)
        assert scores == {**POINTS["zero3"], "test_kept": 0}, (student, scores)
        assert "your file's globals" in page


# Labs 1 and 3: the course's byte counter, which Lab 1's harness needs itself (withheld), taken
# back from its guard's closure; the course's ring (forbidden and hidden) run from its text
FROM_CLOSURE = forgery("measure_from_closure")
RING_FROM_TEXT = """
from pathlib import Path

import zerobook

_theirs = {"__name__": "ring"}
exec((Path(zerobook.__file__).parent / "data_parallel" / "collectives.py").read_text(), _theirs)
ring_all_reduce = _theirs["ring_all_reduce"]
"""


@pytest.fixture(scope="module")
def graded_withheld(tmp_path_factory):
    """One grading run of Labs 1 and 3: each lab's reference and its attacker."""
    from grading_helpers import part_scores, run_grading, sandbox_or_not, source

    if sandbox_or_not():
        pytest.skip(
            "bubblewrap does not work here: hostile submissions are graded only in the sandbox"
        )
    root = tmp_path_factory.mktemp("forgery_withheld")
    attackers = {"memory": FROM_CLOSURE, "ring_allreduce": RING_FROM_TEXT}
    more = {"ring_allreduce": ("side_group", forgery("ring_side_group"))}
    run_grading("release", "--only", *attackers, root=root)
    for lab, attack in attackers.items():
        script = lambda s, code=attack: s.split("\n", 1)[0] + "\n" + code
        students = [
            ("reference", source(lab)),
            ("attacker", edit(source(lab), "rank_script", script)),
        ]
        if lab in more:
            name, code = more[lab]
            first = lambda s, code=code: s.split("\n", 1)[0] + "\n" + code
            students.append((name, edit(source(lab), "rank_script", first)))
        if lab == "memory":  # a builtin shadowed for the tests, beside a wrong count
            wrong = lambda s: s.split("\n", 1)[0] + "\n" + forgery("wrong_count")
            shadow = lambda s: s + "\n\n" + forgery("shadow_enumerate")
            notebook = edit(
                edit(source(lab), "rank_script", wrong), "part1_bytes_per_rank", shadow
            )
            students.append(("shadows_a_builtin", notebook))
            leak = lambda s: forgery("leak_hidden_tests")  # the whole cell, replaced
            students.append(
                ("leaks_hidden_tests", edit(source(lab), "part1_bytes_per_rank", leak))
            )
        for student, notebook in students:
            folder = root / "submitted" / student / lab
            folder.mkdir(parents=True)
            (folder / f"{lab}.ipynb").write_text(notebook)
    done = run_grading("grade", "--jobs", "2", root=root, check=False)
    return root, done, {lab: part_scores(root, lab, POINTS[lab]) for lab in attackers}


@pytest.mark.xdist_group("forgery_withheld")
@pytest.mark.parametrize(
    "lab, says, flagged",
    [
        (
            "memory",
            "zerobook.train is not a module this lab's file may import",
            "__closure__",
        ),
        (
            "ring_allreduce",
            "zerobook is not a module this lab's file may import",
            "exec",
        ),
    ],
)
def test_a_withheld_original_from_a_closure_or_a_hidden_ring_run_from_text_scores_zero(
    graded_withheld, lab, says, flagged
):
    root, done, scores = graded_withheld
    assert scores[lab]["reference"] == POINTS[lab], done.stdout[-3000:]
    rank_parts = {"memory": ["test_measurement"]}.get(
        lab, POINTS[lab]
    )  # the rest: functions
    assert scores[lab]["attacker"] == {**POINTS[lab], **dict.fromkeys(rank_parts, 0)}
    assert says in feedback_page(root, "attacker", lab)
    flags = re.findall(rf"^FLAGGED: attacker / {lab}: (.*)$", done.stdout, re.M)
    assert any(flagged in f for f in flags), flags


@pytest.mark.xdist_group("forgery_withheld")
def test_a_function_named_like_a_builtin_does_not_replace_it_for_the_tests(
    graded_withheld,
):
    """The red team's Lab 1 submission scored its wrong byte count 3/3 by defining
    `enumerate` in a notebook cell: the clean run bound every name a cell defined into the
    tests' namespace. Now only the names the course's cell defines are bound."""
    root, done, scores = graded_withheld
    assert scores["memory"]["shadows_a_builtin"]["test_measurement"] == 0
    flags = re.findall(
        r"^FLAGGED: shadows_a_builtin / memory: (.*)$", done.stdout, re.M
    )
    assert any("named like Python's own enumerate" in f for f in flags), flags


@pytest.mark.xdist_group("forgery_withheld")
def test_no_feedback_page_shows_a_line_of_the_hidden_tests(graded_withheld):
    """The red team's Lab 1 cell printed, from nbgrader's kernel, the hidden tests IPython kept
    in linecache; a feedback page now shows no output the kernel made once it had seen them,
    only the clean run's verdicts."""
    import html
    import json

    from zerobook.classroom.feedback import HIDDEN

    root, done, scores = graded_withheld
    # its work is right where its cell runs (nbgrader's kernel); the clean run, which scores,
    # refuses the cell by the lab's rules (linecache is not a module it may import)
    assert scores["memory"]["leaks_hidden_tests"] == {
        **POINTS["memory"],
        "test_accounting": 0,
    }
    hidden = set()
    for lab in ("memory", "ring_allreduce"):
        cells = json.loads((ROOT / "labs" / lab / f"{lab}.ipynb").read_text())["cells"]
        for block in HIDDEN.findall("\n".join("".join(c["source"]) for c in cells)):
            hidden |= {
                line.strip()
                for line in block.splitlines()[1:-1]
                if len(line.strip()) > 20
            }
    assert hidden
    for page in (root / "feedback").rglob("*.html"):
        text = html.unescape(page.read_text())
        shown = sorted(line for line in hidden if line in text)
        assert not shown, (page, shown[:3])


@pytest.mark.xdist_group("forgery_withheld")
def test_a_ring_through_a_process_group_of_its_own_scores_zero(graded_withheld):
    """The second red team's ring all-reduced on a group it made, through the group's own
    method (no dist function, the default group's count unmoved): the ring lab's rules do not
    offer new_group (every group's count is watched as well)."""
    root, done, scores = graded_withheld
    assert scores["ring_allreduce"]["side_group"] == dict.fromkeys(
        POINTS["ring_allreduce"], 0
    )
    refused = "torch.distributed.new_group is not a name this lab's file may use"
    assert refused in feedback_page(root, "side_group", "ring_allreduce")
    flags = re.findall(
        r"^FLAGGED: side_group / ring_allreduce: (.*)$", done.stdout, re.M
    )
    assert any("new_group" in f for f in flags), flags
