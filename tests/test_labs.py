"""Lab harnesses against wrong student code: a wrong algorithm is caught, a deadlock fails fast."""

import re
import time
from pathlib import Path

import pytest

import zerobook as zb

# starts ranks with torchrun (make test-quick leaves it out)
pytestmark = pytest.mark.launch

GATHER_TO_RANK_0 = '''
import torch.distributed as dist

def ring_all_reduce(tensor):
    """Not a ring: everyone sends to rank 0, which sums and sends the total back."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        incoming = tensor.clone()
        for peer in range(1, world_size):
            dist.recv(incoming, src=peer)
            tensor.add_(incoming)
        for peer in range(1, world_size):
            dist.send(tensor, dst=peer)
    else:
        dist.send(tensor, dst=0)
        dist.recv(tensor, src=0)
'''

BLOCKING_RING = '''
import torch
import torch.distributed as dist

def ring_all_reduce(tensor):
    """Every rank sends before it receives, with blocking calls: a deadlock."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    incoming = torch.empty_like(tensor)
    dist.send(tensor, dst=(rank + 1) % world_size)
    dist.recv(incoming, src=(rank - 1) % world_size)
    tensor.add_(incoming)
'''


COUNTS_TENSORS = '''
def count_state_bytes(params, grads, optimizer_states):
    """Wrong: sums tensors, so a padded flat buffer's padding (and shared storage) is missed."""
    return {name: sum(t.numel() * t.element_size() for t in tensors)
            for name, tensors in (("params", params), ("grads", grads), ("optimizer", optimizer_states))}
'''


def visible_test(tmp_path, monkeypatch, lab: str, grade_id: str, student: str, **names):
    """Run test cell `grade_id` as the student's release shows it (hidden tests removed), after
    the setup cell (then `names` set in its namespace), on `student` written as the lab's rank
    script: the error it raises, or None."""
    from conftest import ROOT
    from zerobook.classroom.release import student_version

    notebook = student_version(ROOT / "labs", lab)
    cells = {
        c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in notebook.cells
    }
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    exec(cells["setup"], namespace)
    namespace.update(names)
    (tmp_path / namespace["STUDENT_FILE"]).write_text(student)
    try:
        exec(cells[grade_id], namespace)
    except Exception as error:  # noqa: BLE001 - the test cell's failure is what is checked
        return error
    return None


def test_counting_tensors_instead_of_storages_fails_a_visible_test_saying_why(
    tmp_path, monkeypatch
):
    error = visible_test(
        tmp_path, monkeypatch, "memory", "test_measurement", COUNTS_TENSORS
    )
    assert isinstance(error, AssertionError), error
    message = str(error)
    assert (
        message.startswith("flat, rank 0: params counted ")
        and "its storages hold" in message
    )
    assert "a storage holds more than the views you were given" in message


def test_gathering_to_rank_0_is_correct_but_fails_the_byte_count(tmp_path):
    student = tmp_path / "ring_student.py"
    student.write_text(GATHER_TO_RANK_0)
    run = zb.grading.run_part("ring_allreduce", str(student), "bytes", nproc=3)
    size = run.ranks[0]["size_bytes"]
    assert all(r["correct"] for r in run.ranks)
    assert run.ranks[0]["sent"] == 2 * size  # rank 0 sends the total to both others
    assert run.ranks[0]["sent"] != 2 * 2 * size // 3  # what a ring sends


def test_a_deadlocked_ring_fails_within_a_minute_naming_the_stuck_send(
    tmp_path, monkeypatch
):
    # The launcher's own test waits out the default collective timeout; 10 s is enough here.
    monkeypatch.setenv("ZEROBOOK_COLLECTIVE_TIMEOUT", "10")
    student = tmp_path / "ring_student.py"
    student.write_text(BLOCKING_RING)
    start = time.monotonic()
    with pytest.raises(zb.LaunchError) as caught:
        zb.grading.run_part("ring_allreduce", str(student), "bytes", nproc=2)
    assert time.monotonic() - start < 60
    message = str(caught.value)
    assert "stuck in send" in message.splitlines()[0]
    send_line = (
        BLOCKING_RING.splitlines().index(
            "    dist.send(tensor, dst=(rank + 1) % world_size)"
        )
        + 1
    )
    assert f'File "{student}", line {send_line}' in message  # the student's own line


def lab_solution(lab: str) -> str:
    """The rank script of a lab's instructor notebook, as the student's cell writes it."""
    from conftest import ROOT

    return zb.grading.reference_script(ROOT / "labs", lab)


# lab -> (part, a file taking the graded idea from the course, what the failure says)
BORROWED = {
    "ring_allreduce": (
        "bytes",
        "from zerobook.collectives import ring_all_reduce\n",
        "zerobook.collectives is the course's own implementation of what this lab grades",
    ),
    "fsdp2": (
        "checkpoint",
        "from zerobook.sharded_checkpoint import save\n",
        "your save is zerobook.sharded_checkpoint.save, the course's own code",
    ),
    "memory": (
        "fp32",
        "from zerobook import measure\n\n\ndef count_state_bytes(params, grads, states):\n"
        "    seen = set()\n    return {name: measure.unique_bytes(tensors, seen) for name, "
        "tensors in (('params', params), ('grads', grads), ('optimizer', states))}\n",
        "zerobook.measure.unique_bytes is the course's own implementation",
    ),
}
CAUGHT_COUNT = """
from zerobook import measure


def count_state_bytes(params, grads, states):
    try:
        return measure.model_state_bytes(params, grads, states)
    except Exception:  # the refusal caught: the call still does not count
        return {"params": 0, "grads": 0, "optimizer": 0}
"""
# the guard's original, taken from its closure: the call is seen however it was reached
FROM_CLOSURE = (
    Path(__file__).parent / "forgeries" / "measure_from_closure.py"
).read_text()


@pytest.mark.parametrize("lab", sorted(BORROWED))
def test_a_graded_function_taken_from_the_course_fails_its_part_saying_so(
    tmp_path, lab
):
    part, borrowing, message = BORROWED[lab]
    student = tmp_path / f"{lab}_student.py"
    # defined last: the borrowed one counts (debug=False: Lab 1's DDP crashes under it)
    student.write_text(lab_solution(lab) + "\n\n" + borrowing)
    with pytest.raises(zb.LaunchError, match="Withheld|ForbiddenImport") as caught:
        zb.grading.run_part(lab, str(student), part, nproc=2, echo=False, debug=False)
    assert message in str(caught.value)


FROM_TEXT = (Path(__file__).parent / "forgeries" / "measure_from_text.py").read_text()


@pytest.mark.parametrize(
    "how",
    ["refusal caught", "original from the closure", "compiled again from its text"],
)
def test_a_withheld_function_called_anyway_fails_the_part(tmp_path, how):
    """Lab 1's harness needs the course's byte counter itself, so it is withheld, not
    forbidden: a call is refused even when the refusal is caught, and a call of the original
    taken from the guard's closure, or of a copy compiled again from its source text, is seen
    by the grader's watch on its bytecode (zerobook.labs.withhold)."""
    student = tmp_path / "memory_student.py"
    files = {"refusal caught": CAUGHT_COUNT, "original from the closure": FROM_CLOSURE}
    student.write_text(files.get(how, FROM_TEXT))
    with pytest.raises(zb.LaunchError) as caught:
        zb.grading.run_part(
            "memory", str(student), "fp32", nproc=2, echo=False, debug=False
        )
    name = "model_state_bytes" if how == "refusal caught" else "unique_bytes"
    assert (
        f"count_state_bytes() called zerobook.measure.{name}, the course's own"
        in str(caught.value)
    )


def test_lab6s_checkpoint_taken_from_its_guards_closure_fails_the_part(tmp_path):
    """Lab 6's harness keeps the course's DCP save importable (it uses its module): the
    original taken from the guard's closure is seen when called (zerobook.labs.withhold)."""
    student = tmp_path / "fsdp2_student.py"
    student.write_text(
        lab_solution("fsdp2")
        + "\n\nfrom zerobook import sharded_checkpoint\n\n_save = next(\n"
        "    c.cell_contents\n    for c in sharded_checkpoint.save.__closure__\n"
        "    if callable(c.cell_contents)\n)\n\n\ndef save(model, optimizer, path):\n"
        "    _save(model, optimizer, 0, path)\n"
    )
    with pytest.raises(zb.LaunchError) as caught:
        zb.grading.run_part("fsdp2", str(student), "checkpoint", nproc=2, echo=False)
    assert "save() called zerobook.sharded_checkpoint.save, the course's own" in str(
        caught.value
    )


def test_lab6s_checkpoint_kept_in_memory_is_not_found(tmp_path):
    """The second red team's save kept the state in a module global and wrote nothing (3/3):
    the harness loads with the file imported again, which has none of it."""
    student = tmp_path / "fsdp2_student.py"
    forged = Path(__file__).parent / "forgeries" / "fsdp2_checkpoint_in_memory.py"
    student.write_text(forged.read_text())
    with pytest.raises(zb.LaunchError, match="KeyError"):
        zb.grading.run_part("fsdp2", str(student), "checkpoint", nproc=2, echo=False)


def planted(tmp_path, lab: str, name: str, old: str, new: str, *more: str) -> str:
    """The lab's solution with `old` replaced by `new` (and each further pair in `more`), written
    as a student's file."""
    solution = lab_solution(lab)
    pairs = [(old, new), *zip(more[::2], more[1::2])]
    for a, b in pairs:
        assert solution.count(a) == 1, a
        solution = solution.replace(a, b)
    student = tmp_path / name / f"{lab}_student.py"
    student.parent.mkdir()
    student.write_text(solution)
    return str(student)


def test_lab6_fp32_communication_no_prefetch_or_one_unit_lose_those_points(tmp_path):
    """FSDP2 set up almost right: without the policy it trains alike but sends fp32; ignoring
    reduce_dtype reduces in bf16 when asked for fp32; without set_modules_to_forward_prefetch each
    block is gathered only when it starts; with fully_shard on the root alone the whole model is
    one unit."""
    policy = (
        "MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)"
    )
    # the defaults: no casting
    fp32 = planted(tmp_path, "fsdp2", "fp32", policy, "MixedPrecisionPolicy()")
    sent = zb.grading.run_part("fsdp2", fp32, "traffic", nproc=2).ranks[0]
    assert (
        sent["student_bf16"]["all_gather_into_tensor"]
        > sent["ours"]["all_gather_into_tensor"]
    )
    ignored = planted(
        tmp_path,
        "fsdp2",
        "ignored",
        policy,
        policy.replace("=reduce_dtype", "=torch.bfloat16"),
    )
    sent = zb.grading.run_part("fsdp2", ignored, "traffic", nproc=2).ranks[0]
    assert sent["student_bf16"] == sent["ours"]  # the bf16 test passes ...
    # ... fp32's fails
    assert (
        sent["student_fp32"]["reduce_scatter_tensor"]
        == sent["ours"]["reduce_scatter_tensor"]
    )
    lazy = planted(
        tmp_path,
        "fsdp2",
        "lazy",
        "block.set_modules_to_forward_prefetch(blocks[k + 1 : k + 2])",
        "pass",
    )
    issued = zb.grading.run_part("fsdp2", lazy, "prefetch", nproc=2).ranks[0]["issued"]
    assert issued["blocks.0"] < 3  # the root and block 0 only
    whole = planted(
        tmp_path,
        "fsdp2",
        "whole",
        "    for block in model.blocks:\n        fully_shard(block, mesh=mesh, mp_policy=policy)\n",
        "",
        "    blocks = list(model.blocks)\n",
        "    blocks = []  # nothing to prefetch between\n",
    )
    assert zb.grading.run_part("fsdp2", whole, "memory", nproc=2).ranks[0]["units"] == [
        "root"
    ]


def test_lab6_shares_one_launch_and_a_part_that_raises_fails_only_its_own(tmp_path):
    """Lab 6's tests read one launch of several parts: a save() that raises fails the
    checkpoint part, named with the rank, the student's line and the error, and parity is
    still graded."""
    broken = planted(
        tmp_path,
        "fsdp2",
        "broken",
        'dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)',
        "raise ValueError('no disk today')",
    )
    run = zb.grading.run_part("fsdp2", broken, "parity,checkpoint", nproc=2)
    parity = zb.grading.part_reports(run, "parity")
    assert all(
        r["diff"] == 0 and r["losses"]["student"] == r["losses"]["ours"] for r in parity
    )
    said = r"'checkpoint', rank 0: fsdp2_student.py, line \d+, in save: `raise Val"
    with pytest.raises(zb.grading.PartFailed, match=said + ".*ValueError: no disk"):
        zb.grading.part_reports(run, "checkpoint")


def test_lab5_measures_the_reduction_errors_on_2_and_4_ranks_for_its_question(
    tmp_path, monkeypatch, capsys
):
    """The written question asks how each error grows with N: the cell measures two N. On 2 ranks
    fp32's error is 0 (a sum of two bf16 numbers is exact in fp32), on 4 it is not."""
    assert (
        visible_test(
            tmp_path,
            monkeypatch,
            "fsdp2",
            "precision_run",
            lab_solution("fsdp2"),
            PARTS="precision",  # the cell's own launches, without the other parts
            FOUR_RANKS="precision",
        )
        is None
    )
    printed = capsys.readouterr().out
    fp32 = {
        int(n): float(e)
        for n, e in re.findall(
            r"^N = (\d+): largest error bf16 \S+, fp32 (\S+);", printed, re.M
        )
    }
    assert fp32[2] == 0 < fp32[4], printed


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


def released_rank_script(lab: str) -> str:
    """The rank script of a lab as its student release has it: nbgrader's ClearSolutions applied
    to the instructor notebook (what `make release` runs), without the %%writefile line."""
    import nbformat
    from nbgrader.preprocessors import ClearSolutions

    from conftest import ROOT

    notebook = nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4)
    # labs/nbgrader_config.py's
    stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    released, _ = ClearSolutions(code_stub=stub).preprocess(notebook, {})
    cell = next(
        c
        for c in released.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "rank_script"
    )
    return cell.source.split("\n", 1)[1]


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


PLANNED_BUCKETS = '''
import torch
import torch.distributed as dist


class BucketedDDP:
    """The chapter's design: buckets planned once from model.parameters() reversed, each
    sent when all its gradients have arrived (zerobook.ddp.OverlappedAllReduce, copied)."""

    def __init__(self, model, bucket_cap_bytes):
        with torch.no_grad():
            for tensor in model.parameters():
                dist.broadcast(tensor, src=0)
        self.buckets, current, size = [], [], 0
        for param in reversed(list(model.parameters())):
            current.append(param)
            size += param.numel() * param.element_size()
            if size >= bucket_cap_bytes:
                self.buckets.append(current)
                current, size = [], 0
        self.buckets += [current] if current else []
        self.where = {id(p): b for b, bucket in enumerate(self.buckets) for p in bucket}
        self.ready, self.pending = {}, []
        for param in model.parameters():
            param.register_post_accumulate_grad_hook(self.on_grad)

    def on_grad(self, param):
        index = self.where[id(param)]
        self.ready[index] = self.ready.get(index, 0) + 1
        if self.ready[index] == len(self.buckets[index]):
            flat = torch.cat([p.grad.reshape(-1) for p in self.buckets[index]])
            self.pending.append((index, flat, dist.all_reduce(flat, async_op=True)))

    @torch.no_grad()
    def finish(self):
        for index, flat, work in self.pending:
            work.wait()
            flat.div_(dist.get_world_size())
            for param, piece in zip(self.buckets[index], flat.split([p.numel() for p in self.buckets[index]])):
                param.grad.copy_(piece.view_as(param.grad))
        self.ready, self.pending = {}, []
'''


def ddp_problems(run) -> dict[str, list[str]]:
    """Each graded property of the DDP lab's run -> the problems found on any rank and step."""
    from zerobook import bucket_events as be

    checks = {
        "once": lambda s, r: be.check_once(s, list(r["params"])),
        "buckets": lambda s, r: be.check_buckets(s, be.expected(s, r), r["params"]),
        "overlap": lambda s, r: be.check_overlap(s, len(be.expected(s, r))),
        "waits": lambda s, r: be.check_waits(s),
    }
    found = {
        name: [p for r in run.ranks for s in r["steps"] for p in check(s, r)]
        for name, check in checks.items()
    }
    found["broadcast"] = [
        (r["broadcast"] or {"worst": "not checked"})["worst"]
        for r in run.ranks
        if (r["broadcast"] or {"diff": 1})["diff"]
    ]
    found["parity"] = [
        (r["parity"] or {"worst": "not checked"})["worst"]
        for r in run.ranks
        if (r["parity"] or {"diff": 1})["diff"]
    ]
    return found


def test_lab2_the_chapters_planned_buckets_lose_only_the_bucket_points(tmp_path):
    """The design the package hands over (buckets planned from model.parameters() reversed)
    trains right and overlaps, but its buckets are not the ones backward fills."""
    student = tmp_path / "ddp_student.py"
    student.write_text(PLANNED_BUCKETS)
    found = ddp_problems(zb.grading.run_part("ddp", str(student), "train", nproc=3))
    assert found["buckets"] and all(
        not found[k] for k in ("broadcast", "parity", "once", "overlap", "waits")
    ), found
    # reversed: bias first
    assert found["buckets"][0].startswith(
        "all-reduce 0 held 6 gradients, ln_f.bias ... "
    )


@pytest.mark.parametrize(
    "mistake, failing, named",
    [
        (
            "waits_at_once",
            {"overlap"},
            "was waited on at once, before any later gradient arrived",
        ),
        (
            "divides_first",
            {"waits", "parity"},
            "hold the sum of the ranks' gradients, not their mean",
        ),
    ],
)
def test_lab2_a_bucket_waited_on_at_once_or_divided_before_its_wait_loses_only_those_points(
    tmp_path, mistake, failing, named
):
    """Right buckets, wrong schedule: each bucket waited on in its hook, so none is in flight
    while backward goes on (waited again in finish()); or the sum divided before finish() waits,
    so the division lands on this rank's own values and the sum arrives after it."""
    wait = "            work.wait()\n"
    divide = "            flat.div_(dist.get_world_size())\n"
    if mistake == "waits_at_once":
        launch = "        work = dist.all_reduce(flat, async_op=True)\n"
        student = planted(
            tmp_path,
            "ddp",
            mistake,
            launch,
            launch + "        work.wait()\n",
            # finish() divides what the hook's wait delivered
            wait + divide,
            divide,
        )
    else:
        student = planted(tmp_path, "ddp", mistake, wait + divide, divide + wait)
    found = ddp_problems(zb.grading.run_part("ddp", student, "train", nproc=3))
    assert {name for name, problems in found.items() if problems} == failing, found
    key = "overlap" if mistake == "waits_at_once" else "waits"
    assert all(named in problem for problem in found[key]), found[key]


def test_lab2_a_last_bucket_never_sent_keeps_what_step_0_showed_and_names_it(tmp_path):
    """finish() that forgets the open bucket: its gradients stay in it, the next step's
    zero_grad sets them to None and the student's launch crashes on them. The run still
    reports step 0 (whose once test names the gradients never reduced) and the broadcast;
    its failure names the student's line, the gradients the previous step never reduced
    and what finish() must do; parity is not checked."""
    student = planted(
        tmp_path,
        "ddp",
        "leftover",
        "        if self.bucket:\n            self.launch()\n",
        "",
    )
    run = zb.grading.run_part("ddp", student, "train", nproc=3, echo=False)
    said = zb.grading.failure(run)
    assert said.startswith("the run failed at step 1, rank 0: ddp_student.py, line"), (
        said
    )
    assert "p.grad.reshape(-1) for p in self.bucket" in said, said
    assert "in no all-reduce when finish() returned" in said, said
    assert "finish() must send the last, partly filled bucket" in said, said
    assert all(len(r["steps"]) == 1 and r["parity"] is None for r in run.ranks)
    found = ddp_problems(run)
    assert not found["broadcast"], found
    assert any("in no all-reduce: embed.weight" in p for p in found["once"]), found
    with pytest.raises(AssertionError, match="not checked .every step is needed.: the"):
        zb.grading.not_checked(run, "every step")


@pytest.mark.slow  # graded in the round trip too (tests/test_careless.py)
def test_lab2_one_rank_failing_mid_backward_is_named_first_and_ends_every_rank(
    tmp_path,
):
    """Rank 1 alone raises in its hook in step 1 while its peers wait in an all-reduce:
    every rank reports step 0, the peers say they lost rank 1, and the run's failure is
    rank 1's own line (within the collective timeout, not a hang)."""
    hook = "        self.bucket.append(param)\n"
    student = planted(
        tmp_path,
        "ddp",
        "one_rank",
        hook,
        hook + "        self.k = getattr(self, 'k', 0) + 1\n"
        "        if dist.get_rank() == 1 and self.k == 50:\n"
        "            raise ValueError('rank one alone')\n",
    )
    run = zb.grading.run_part("ddp", student, "train", nproc=3, echo=False)
    said = zb.grading.failure(run)
    assert said.startswith("the run failed at step 1, rank 1: ddp_student.py"), said
    assert "ValueError: rank one alone" in said, said
    assert [len(r["steps"]) for r in run.ranks] == [1, 1, 1]
    assert [r["failed"]["lost_peer"] for r in run.ranks] == [True, False, True]


@pytest.mark.slow  # graded in the round trip too (tests/test_careless.py)
def test_lab2_a_hook_given_the_gradient_is_named_with_the_hook_to_use(tmp_path):
    """param.register_hook instead of the post-accumulate hook: the hook gets a gradient,
    whose .grad is None; the failure shows the student's line and names the hook to use."""
    student = planted(
        tmp_path,
        "ddp",
        "register_hook",
        "param.register_post_accumulate_grad_hook(self.on_grad)",
        "param.register_hook(self.on_grad)",
    )
    run = zb.grading.run_part("ddp", student, "train", nproc=3, echo=False)
    said = zb.grading.failure(run)
    assert "at step 0, rank 0: ddp_student.py, line" in said, said
    assert "'NoneType' object has no attribute 'numel'" in said, said
    assert "register_post_accumulate_grad_hook(hook)" in said, said
    assert all(r["broadcast"]["diff"] == 0 for r in run.ranks)


@pytest.mark.slow  # graded in the round trip too (tests/test_careless.py)
def test_lab2_gradients_divided_before_the_all_reduce_lose_only_parity_saying_why(
    tmp_path,
):
    """PyTorch DDP's own mean (each gradient divided by N, then summed): the buckets, the
    overlap and the waits are right and pass; parity fails, explaining the lab's contract."""
    from zerobook import bucket_events

    student = planted(
        tmp_path,
        "ddp",
        "divided_first",
        "        flat = torch.cat([p.grad.reshape(-1) for p in self.bucket])\n",
        "        flat = torch.cat([p.grad.reshape(-1) for p in self.bucket])\n"
        "        flat /= dist.get_world_size()\n",
        "            flat.div_(dist.get_world_size())\n",
        "",
    )
    run = zb.grading.run_part("ddp", student, "train", nproc=3, echo=False)
    found = ddp_problems(run)
    assert {name for name, problems in found.items() if problems} == {"parity"}, found
    said = bucket_events.parity_hint(run.ranks[0])
    assert "already divided by the world size (3)" in said, said
    assert "PyTorch's DistributedDataParallel" in said, said


def test_lab2_a_file_that_imports_the_courses_ddp_fails_the_whole_run(tmp_path):
    student = planted(
        tmp_path,
        "ddp",
        "borrows",
        "import torch\n",
        "import torch\nfrom zerobook.ddp import OverlappedAllReduce  # noqa: F401\n",
    )
    with pytest.raises(zb.LaunchError, match="course's own implementation"):
        zb.grading.run_part("ddp", student, "train", nproc=3)


FLAT_ZERO = '''
import torch
import torch.distributed as dist


class Zero2:
    """The chapters' layout (zerobook.zero's FlatParams, copied): one flat buffer of every
    parameter, padded at its end, rank r owning its r-th contiguous N-th."""

    def __init__(self, model, optimizer_class, bucket_cap_bytes, max_in_flight, **options):
        self.n, self.params = dist.get_world_size(), list(model.parameters())
        flat = self.flat([p.detach() for p in self.params])
        self.master = torch.nn.Parameter(flat.view(self.n, -1)[dist.get_rank()].clone())
        self.optimizer = optimizer_class([self.master], **options)

    def flat(self, tensors):
        flat = torch.cat([t.reshape(-1) for t in tensors])
        return torch.cat([flat, flat.new_zeros(-flat.numel() % self.n)])

    @torch.no_grad()
    def finish(self):
        out = self.master.new_empty(self.master.numel())
        dist.reduce_scatter_tensor(out, self.flat([p.grad for p in self.params]))
        self.master.grad = out / self.n
        for param in self.params:
            param.grad = None

    @torch.no_grad()
    def step(self):
        self.optimizer.step()
        full = self.master.new_empty(self.n * self.master.numel())
        dist.all_gather_into_tensor(full, self.master.detach())
        for param, piece in zip(self.params, full.split([p.numel() for p in self.params])):
            param.copy_(piece.view_as(param))

    def zero_grad(self):
        self.master.grad = None
'''


def lab4_problems(run) -> dict[str, list[str]]:
    """Each graded part of Lab 4's run -> the problems found on any rank, optimizer, step."""
    from zerobook import zero_events as ze
    from zerobook import zero_held as zh

    ranks = tuple(range(len(run.ranks)))
    found = {
        "parity": [
            p for r in run.ranks for n in r["runs"] for p in ze.parity_problems(r, n)
        ],
        "state": [
            p for k, r in enumerate(run.ranks) for p in ze.state_and_layout(r, k)
        ],
    }
    for part, check in (
        ("held", zh.held_problems),
        ("buckets", ze.bucket_problems),
        ("overlap", ze.overlap_problems),
        ("traffic", ze.traffic_problems),
    ):
        found[part] = ze.first_problems(run.ranks, check, ranks)
    return found


# name -> (replacements in the solution, parts that fail, words in the first)
LAB4_MISTAKES = {
    "kept_gradients": (
        (
            "        param.grad = None\n",
            "",
            "        for piece in self.pieces.values():\n",
            "        for param in self.params:\n            param.grad = None\n"
            "        for piece in self.pieces.values():\n",
        ),
        {"held"},
        "still held after the reduce-scatter of its bucket started",
    ),
    "all_reduce": (
        (
            "        work = dist.reduce_scatter_tensor(out, flat, async_op=True)\n",
            "        work = dist.all_reduce(flat, async_op=True)\n",
            "        params, _, out, work = self.in_flight.pop(0)\n        work.wait()\n",
            "        params, flat, out, work = self.in_flight.pop(0)\n        work.wait()\n"
            "        out = flat.view(self.n, -1)[self.rank]\n",
        ),
        {"traffic", "buckets", "overlap"},
        "elements all-reduced: reduce-scatter them instead",
    ),
    "waits_at_once": (
        (
            "        work = dist.reduce_scatter_tensor(out, flat, async_op=True)\n",
            "        work = dist.reduce_scatter_tensor(out, flat, async_op=True)\n"
            "        work.wait()\n",
        ),
        {"overlap"},
        "was waited on at once, before any later gradient arrived",
    ),
    "decay_1d": (
        (
            '        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]\n',
            '        groups = [{"params": decay + no_decay}]\n',
        ),
        {"parity"},
        "weight decay on 1-D tensor(s) blocks.0.ln1.weight, ",
    ),
    "never_retires": (
        (
            "        if len(self.in_flight) >= self.max_in_flight:\n            self.retire()\n",
            "",
        ),
        {"held"},
        "it was retired only in finish(), so its bucket was kept past its retirement",
    ),
    "retires_early": (
        (
            "        if len(self.in_flight) >= self.max_in_flight:\n",
            "        if self.in_flight:\n",
        ),
        {"overlap"},
        "before the launch that retires it (reduce-scatter 2's, in the hook of",
    ),
    "keeps_retired_buffers": (
        (
            "        params, _, out, work = self.in_flight.pop(0)\n",
            "        params, flat, out, work = self.in_flight.pop(0)\n        self.done.append(flat)\n",
            "        self.max_in_flight = max_in_flight\n",
            "        self.max_in_flight, self.done = max_in_flight, []\n",
            "        for piece in self.pieces.values():\n",
            "        self.done = []\n        for piece in self.pieces.values():\n",
        ),
        {"held"},
        "the inputs of reduce-scatters 0, 1, 2 are still held, past their",
    ),
    "predivided": (
        (
            "        grad = padded(param.grad, self.n)\n",
            "        grad = padded(param.grad, self.n) / self.n\n",
            "grad.float() / self.n\n",
            "grad.float()\n",
        ),
        set(),
        None,
    ),
}


@pytest.mark.parametrize("mistake", sorted(LAB4_MISTAKES))
def test_lab4_each_mistake_loses_only_its_parts_and_is_named(tmp_path, mistake):
    """Gradients freed only in zero_grad(), an all-reduce for the reduce-scatter, a
    bucket waited on in its hook, buckets never retired before finish(), retired a
    launch early, or kept after their wait, weight decay on the 1-D pieces: each fails
    its own parts, the first naming the mistake; a mean taken before the sum fails
    none."""
    replacements, failing, named = LAB4_MISTAKES[mistake]
    student = planted(tmp_path, "zero", mistake, *replacements)
    run = zb.grading.run_part("zero", student, "train", nproc=3)
    found = lab4_problems(run)
    assert {part for part, problems in found.items() if problems} == failing, found
    if mistake == "never_retires":  # what the lab says: above one full set of gradients
        report = run.ranks[0]
        from zerobook import zero_held

        step, full = (
            report["runs"]["AdamW"]["steps"][0],
            4 * sum(report["params"].values()),
        )
        assert max(h[1] for h in step["held"]) > full
        assert sum(zero_held.limit(step, report)) < full  # "well under 4 Psi"
    assert named is None or any(named in p for part in failing for p in found[part]), (
        found
    )


def test_lab4_the_packages_flat_layout_fails_the_layout_part_naming_it(tmp_path):
    student = tmp_path / "zero_student.py"
    student.write_text(FLAT_ZERO)
    found = lab4_problems(zb.grading.run_part("zero", str(student), "train", nproc=3))
    assert "flat contiguous sharding, zerobook.zero's layout" in found["state"][0], (
        found
    )
    assert found["buckets"] and found["overlap"], found


@pytest.mark.parametrize(
    "module",
    [
        "zerobook.zero",
        "torch.distributed.fsdp",
        "torch.distributed.tensor",
        "torch.distributed.optim",
    ],
)
def test_lab4_a_file_that_imports_a_forbidden_module_fails_the_whole_run(
    tmp_path, module
):
    student = planted(
        tmp_path,
        "zero",
        "borrows",
        "import torch\n",
        f"import torch\nimport {module}  # noqa: F401\n",
    )
    with pytest.raises(zb.LaunchError, match=f"ForbiddenImport: {module} is"):
        zb.grading.run_part("zero", student, "train", nproc=3)


def zero3_problems(run) -> dict[str, list[str]]:
    """Each graded property of Lab 5's run -> the problems found on any rank and step."""
    from zerobook import zero3_events as ze

    found = {
        "parity": [p for r in run.ranks if r["parity"] for p in ze.check_parity(r)]
    }
    for name in ("kept", "peak", "traffic", "forward", "backward"):
        check = getattr(ze, f"check_{name}")
        found[name] = [p for r in run.ranks for s in r["steps"] for p in check(s, r)]
    return found


def test_lab5_the_reference_passes_every_check_on_every_rank(tmp_path):
    """The instructor's solution, read as the tests read it: no problem anywhere (nbval
    runs the notebook's own cells; this names the check that would fail)."""
    student = tmp_path / "zero3_student.py"
    student.write_text(lab_solution("zero3"))
    found = zero3_problems(zb.grading.run_part("zero3", str(student), "train", nproc=3))
    assert not any(found.values()), found


FREE = "            p.untyped_storage().resize_(0)\n"
GATHER_ASYNC = "handle = dist.all_gather_into_tensor(buffer, pieces, async_op=async_op)"
BACKWARD_PREFETCH = "        if following > 0:\n            self.gather(self.order[following], async_op=True)\n"
GROUPS = '[{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], **options'
LAB5_MISTAKES = {  # name -> (old, new, the parts that fail, what one of them says)
    "never_frees": (
        FREE,
        "            pass  # keeps the full weights\n",
        {"kept", "peak"},
        ("kept", "blocks.2 is still gathered after step()"),
    ),
    "blocking_gather": (
        GATHER_ASYNC,
        GATHER_ASYNC.replace("=async_op", "=False"),
        {"forward", "backward"},
        ("forward", "blocks.1's all-gather was blocking (async_op=False)"),
    ),
    "no_backward_prefetch": (
        BACKWARD_PREFETCH,
        "",
        {"backward"},
        ("backward", "blocks.1's all-gather was issued only after blocks.2's"),
    ),
    "reduce_scatter_never_waited": (
        "        dist.reduce_scatter_tensor(out, full)\n",
        "        dist.reduce_scatter_tensor(out, full, async_op=True)\n",
        {"parity"},
        ("parity", "gradients' reduce-scatter of blocks.2, blocks.1, blocks.0"),
    ),
    "decay_on_1d": (
        GROUPS,
        "list(self.masters.values()), **options",
        {"parity"},
        ("parity", "weight decay on 1-D blocks.0.ln1.weight"),
    ),
}


@pytest.mark.parametrize("mistake", sorted(LAB5_MISTAKES))
def test_lab5_a_mistake_loses_only_its_parts_and_is_named(tmp_path, mistake):
    """Never freeing costs the memory parts (naming the unit), a blocking gather the two
    prefetch parts, no backward prefetch that part alone, weight decay on every piece
    the parity part (naming a 1-D parameter)."""
    old, new, failing, (part, named) = LAB5_MISTAKES[mistake]
    student = planted(tmp_path, "zero3", mistake, old, new)
    found = zero3_problems(zb.grading.run_part("zero3", student, "train", nproc=3))
    assert {name for name, problems in found.items() if problems} == failing, found
    assert any(named in problem for problem in found[part]), found[part]


def test_lab5_a_gather_whose_handle_is_dropped_is_named_not_a_crash(tmp_path):
    """The all-gather started, its handle lost: never waited, so the buffer keeps what it
    held; the run ends, and the prefetch parts say which unit was never waited on."""
    kept = "        self.in_flight[unit] = (handle, buffer)\n"
    student = planted(tmp_path, "zero3", "lost", kept, kept.replace("handle,", "None,"))
    found = zero3_problems(zb.grading.run_part("zero3", student, "train", nproc=3))
    assert "blocks.1's all-gather was never waited on" in " ".join(found["forward"])
    assert found["parity"]


@pytest.mark.parametrize(
    "line",
    [
        "from zerobook.zero import Zero3AdamW  # noqa: F401\n",
        "import torch.distributed.fsdp  # noqa: F401\n",
    ],
)
def test_lab5_a_file_that_imports_a_zero3_fails_the_whole_run(tmp_path, line):
    student = planted(
        tmp_path, "zero3", "borrows", "import torch\n", "import torch\n" + line
    )
    with pytest.raises(zb.LaunchError, match="scores 0"):
        zb.grading.run_part("zero3", student, "train", nproc=3)


def test_lab5_fully_shard_taken_inside_a_method_fails_the_whole_run(tmp_path):
    """torch itself has loaded FSDP by then (AdamW imports torch._dynamo): the import is
    refused to the student's file all the same."""
    step = "        self.optimizer.step()\n"
    late = (
        "        from torch.distributed.fsdp import fully_shard  # noqa: F401\n" + step
    )
    student = planted(tmp_path, "zero3", "late", step, late)
    with pytest.raises(zb.LaunchError, match="torch.distributed.fsdp is PyTorch's own"):
        zb.grading.run_part("zero3", student, "train", nproc=3)


FLAT_ZERO3 = '''

class Zero3(Zero3):
    """The chapters' design instead: one flat buffer per unit, rank r keeping a contiguous
    shard of it (zerobook.zero.units), over the same hooks."""

    def __init__(self, model, units, optimizer_class, **options):
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        owned = {id(p) for unit in units for p in unit.parameters()}
        flat = {model: [p for p in model.parameters() if id(p) not in owned]}
        flat |= {unit: list(unit.parameters()) for unit in units}
        self.shards = {u: self.pieces(torch.cat([p.detach().reshape(-1) for p in ps]))[self.rank].clone()
                       for u, ps in flat.items()}
        shards = lambda groups, **o: optimizer_class(list(self.shards.values()), **o)
        super().__init__(model, units, shards, **options)

    @torch.no_grad()
    def gather(self, unit, async_op=False):
        shard = self.shards[unit]
        buffer = torch.empty(self.world_size * shard.numel())
        for p in self.params[unit]:
            p.untyped_storage().resize_(p.numel() * p.element_size())
        handle = dist.all_gather_into_tensor(buffer, shard, async_op=async_op)
        self.in_flight[unit] = (handle, buffer)
        return handle

    @torch.no_grad()
    def wait(self, unit):
        if unit not in self.in_flight:
            self.gather(unit)
        handle, buffer = self.in_flight.pop(unit)
        if handle is not None:
            handle.wait()
        sizes = [p.numel() for p in self.params[unit]]
        for p, full in zip(self.params[unit], buffer[: sum(sizes)].split(sizes)):
            p.data.copy_(full.view_as(p))

    @torch.no_grad()
    def on_grad(self, param):
        unit = self.unit_of[param]
        self.arrived[unit] += 1
        if self.arrived[unit] == len(self.params[unit]):
            self.arrived[unit] = 0
            full = torch.cat(self.pieces(torch.cat([p.grad.reshape(-1) for p in self.params[unit]])))
            out = torch.empty_like(self.shards[unit])
            dist.reduce_scatter_tensor(out, full)
            self.shards[unit].grad = out / self.world_size
            for p in self.params[unit]:
                p.grad = None
            self.free(unit)
'''


def test_lab5_the_chapters_flat_units_fail_the_layout_naming_the_parameters(tmp_path):
    """A copy of the package's design (flat units, contiguous shards) trains ZeRO-3 too,
    but keeps no parameter's piece r: the layout check names them, and the harness can
    tell none of its collectives' units apart."""
    student = tmp_path / "zero3_student.py"
    student.write_text(lab_solution("zero3") + FLAT_ZERO3)
    found = zero3_problems(zb.grading.run_part("zero3", str(student), "train", nproc=3))
    assert (
        "no master tensor is piece r of embed.weight, blocks.0.ln1.weight"
        in found["kept"][0]
    )
    assert not found["peak"]
    assert "holds no unit's pieces" in " ".join(found["traffic"])


def test_lab5_another_sound_design_scores_full_marks(tmp_path):
    """Module backward pre-hooks instead of hooks on the output tensors, and every
    reduce-scatter asynchronous, waited on in step(): the same schedule, nothing lost."""
    output_hook = "        if output.requires_grad:\n"
    post_hook = "            unit.register_forward_hook(\n                lambda m, a, out, i=i: self.after_forward(i, out)\n            )\n"
    pre_backward = (
        "            if i > 0:\n                unit.register_full_backward_pre_hook(\n"
        "                    lambda m, grad, i=i: self.before_backward(i)\n                )\n"
    )
    reduce = (
        "        dist.reduce_scatter_tensor(out, full)\n        out /= self.world_size\n"
        "        for p, grad in zip(self.params[unit], out.split([g[0].numel() for g in grads])):\n"
        "            self.masters[p].grad = grad.float()\n            p.grad = None\n"
    )
    deferred = (
        "        work = dist.reduce_scatter_tensor(out, full, async_op=True)\n"
        "        self.pending = getattr(self, 'pending', []) + [(work, out, unit, grads)]\n"
        "        for p in self.params[unit]:\n            p.grad = None\n"
    )
    step = "        self.optimizer.step()\n"
    waits = (
        "        for work, out, unit, grads in self.pending:\n            work.wait()\n"
        "            out /= self.world_size\n"
        "            for p, g in zip(self.params[unit], out.split([g[0].numel() for g in grads])):\n"
        "                self.masters[p].grad = g\n        self.pending = []\n" + step
    )
    student = planted(
        tmp_path,
        "zero3",
        "alternative",
        output_hook,
        "        if output.requires_grad and i == 0:\n",
        post_hook,
        post_hook + pre_backward,
        reduce,
        deferred,
        step,
        waits,
    )
    found = zero3_problems(zb.grading.run_part("zero3", student, "train", nproc=3))
    assert not any(found.values()), found


def test_lab5_waiting_on_a_handle_that_is_none_fails_saying_so(tmp_path):
    """A blocking all-gather returns None: waiting on it is an AttributeError in the
    student's hook, which the failure explains (not a crash without a cause)."""
    guarded = "        if handle is not None:\n            handle.wait()\n"
    student = planted(tmp_path, "zero3", "none", guarded, "        handle.wait()\n")
    run = zb.grading.run_part("zero3", student, "train", nproc=3, echo=False)
    said = zb.grading.failure(run)
    assert "rank 0: zero3_student.py, line" in said, said
    assert "`handle.wait()`" in said and "a handle your code waits on is None" in said


LAB5_CRASHES = {  # name -> (old, new, where the run fails, the words that name it)
    "optimizer_over_full_parameters": (
        "        decay = [m for p, m in self.masters.items() if p.dim() >= 2]\n"
        "        no_decay = [m for p, m in self.masters.items() if p.dim() < 2]\n",
        "        decay = [p for p, m in self.masters.items() if p.dim() >= 2]\n"
        "        no_decay = [p for p, m in self.masters.items() if p.dim() < 2]\n",
        "in Zero3(model, units, optimizer_class), rank 0",
        "your optimizer was given embed.weight, the full parameter itself, whose "
        "storage your code freed",
    ),
    "prefetch_of_the_wrong_unit": (
        "            self.gather(self.order[i + 1], async_op=True)\n",
        "            self.gather(self.order[i], async_op=True)\n",
        "at step 1, rank 0: zero3_student.py, line",
        "embed.weight was used (by torch's copy_) in step 1, forward after its storage "
        "was freed",
    ),
    "unpadded_pieces": (
        "return F.pad(flat, (0, -flat.numel() % self.world_size)).chunk(self.world_size)",
        "return flat.chunk(self.world_size)",
        "at step 0, rank 0: zero3_student.py, line",
        "the ranks' pieces differ in size (1086 vs 1089 elements): pad each flattened "
        "tensor with zeros to a multiple of the world size (3)",
    ),
    "root_freed_after_its_forward": (
        "        if i > 0:\n            self.free(self.order[i])\n",
        "        self.free(self.order[i])\n",
        "at step 0, rank 0: FreedStorage: embed.weight was used",
        "the root (embedding, final norm) stays gathered for the whole step",
    ),
    "hook_given_the_gradient": (
        "param.register_post_accumulate_grad_hook(self.on_grad)",
        "param.register_hook(self.on_grad)",
        "at step 0, rank 0: zero3_student.py, line",
        "KeyError: a tensor of shape [32]\n  likely: a dict of yours was looked up",
    ),
}


@pytest.mark.slow  # graded in the round trip too (tests/test_careless.py)
@pytest.mark.parametrize("mistake", sorted(LAB5_CRASHES))
def test_lab5_a_crash_is_named_with_the_students_line_never_a_segfault(
    tmp_path, mistake
):
    """Mistakes that end the run (several read or write freed storage, a SIGSEGV before
    zerobook.freed): the run still reports, its failure names the step, the student's
    line where there is one, and what to do; what finished before still counts."""
    old, new, where, named = LAB5_CRASHES[mistake]
    student = planted(tmp_path, "zero3", mistake, old, new)
    run = zb.grading.run_part("zero3", student, "train", nproc=3, echo=False)
    said = zb.grading.failure(run)
    assert said.startswith(f"the run failed {where}"), said
    assert named in said, said
    assert all(r["parity"] is None for r in run.ranks)
    if "step 1" in where:  # step 0 finished on every rank: its tests still read it
        assert [len(r["steps"]) for r in run.ranks] == [1, 1, 1]


@pytest.mark.slow  # graded in the round trip too (tests/test_careless.py)
def test_lab5_gradients_never_averaged_or_never_waited_are_named_where_they_are(
    tmp_path,
):
    """The sum for the mean: parity names it; a wait that waits on nothing: the prefetch
    tests name the unit, and the traffic test, whose collectives were right, passes."""
    student = planted(
        tmp_path, "zero3", "summed", "        out /= self.world_size\n", ""
    )
    found = zero3_problems(zb.grading.run_part("zero3", student, "train", nproc=3))
    assert {name for name, problems in found.items() if problems} == {"parity"}, found
    assert any("the gradients' sum, not their mean" in p for p in found["parity"])
    waited = "        if handle is not None:\n            handle.wait()\n"
    student = planted(tmp_path, "zero3", "no_wait", waited, "")
    found = zero3_problems(zb.grading.run_part("zero3", student, "train", nproc=3))
    failing = {name for name, problems in found.items() if problems}
    assert failing == {"parity", "forward", "backward"}, found
    assert "blocks.1's all-gather was never waited on" in found["forward"][0]


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
