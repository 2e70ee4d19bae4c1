"""The ZeRO-3 lab's (Lab 5) harness against wrong student code: each mistake loses only its parts
and is named, a crash is named by the student's line."""

import re

import pytest

import zerobook as zb
from lab_helpers import (
    lab_solution,
    planted,
    visible_test,
)

# starts ranks with torchrun; the labs' feedback on planted mistakes: make test-grading
pytestmark = [pytest.mark.launch, pytest.mark.slow]


def test_zero3_measures_the_reduction_errors_on_2_and_4_ranks_for_its_question(
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


def zero3_problems(run) -> dict[str, list[str]]:
    """Each graded property of Lab 5's run -> the problems found on any rank and step."""
    from zerobook.labs import zero3_events as ze

    found = {
        "parity": [p for r in run.ranks if r["parity"] for p in ze.check_parity(r)]
    }
    for name in ("kept", "peak", "traffic", "forward", "backward"):
        check = getattr(ze, f"check_{name}")
        found[name] = [p for r in run.ranks for s in r["steps"] for p in check(s, r)]
    return found


def test_zero3_the_reference_passes_every_check_on_every_rank(tmp_path):
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


ZERO3_MISTAKES = {  # name -> (old, new, the parts that fail, what one of them says)
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


@pytest.mark.parametrize("mistake", sorted(ZERO3_MISTAKES))
def test_zero3_a_mistake_loses_only_its_parts_and_is_named(tmp_path, mistake):
    """Never freeing costs the memory parts (naming the unit), a blocking gather the two
    prefetch parts, no backward prefetch that part alone, weight decay on every piece
    the parity part (naming a 1-D parameter)."""
    old, new, failing, (part, named) = ZERO3_MISTAKES[mistake]
    student = planted(tmp_path, "zero3", mistake, old, new)
    found = zero3_problems(zb.grading.run_part("zero3", student, "train", nproc=3))
    assert {name for name, problems in found.items() if problems} == failing, found
    assert any(named in problem for problem in found[part]), found[part]


def test_zero3_a_gather_whose_handle_is_dropped_is_named_not_a_crash(tmp_path):
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
def test_zero3_a_file_that_imports_a_zero3_fails_the_whole_run(tmp_path, line):
    student = planted(
        tmp_path, "zero3", "borrows", "import torch\n", "import torch\n" + line
    )
    with pytest.raises(zb.LaunchError, match="scores 0"):
        zb.grading.run_part("zero3", student, "train", nproc=3)


def test_zero3_fully_shard_taken_inside_a_method_fails_the_whole_run(tmp_path):
    """torch itself has loaded FSDP by then (AdamW imports torch._dynamo): the lab's rules
    refuse the import all the same, read from the file's text before a line runs."""
    step = "        self.optimizer.step()\n"
    late = (
        "        from torch.distributed.fsdp import fully_shard  # noqa: F401\n" + step
    )
    student = planted(tmp_path, "zero3", "late", step, late)
    refused = "torch.distributed.fsdp is not a module this lab's file may import"
    with pytest.raises(zb.LaunchError, match=refused):
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


def test_zero3_the_chapters_flat_units_fail_the_layout_naming_the_parameters(tmp_path):
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


def test_zero3_another_sound_design_scores_full_marks(tmp_path):
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


def test_zero3_waiting_on_a_handle_that_is_none_fails_saying_so(tmp_path):
    """A blocking all-gather returns None: waiting on it is an AttributeError in the
    student's hook, which the failure explains (not a crash without a cause)."""
    guarded = "        if handle is not None:\n            handle.wait()\n"
    student = planted(tmp_path, "zero3", "none", guarded, "        handle.wait()\n")
    run = zb.grading.run_part("zero3", student, "train", nproc=3, echo=False)
    said = zb.grading.failure(run)
    assert "rank 0: zero3_student.py, line" in said, said
    assert "`handle.wait()`" in said and "a handle your code waits on is None" in said


ZERO3_CRASHES = {  # name -> (old, new, where the run fails, the words that name it)
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


@pytest.mark.parametrize("mistake", sorted(ZERO3_CRASHES))
def test_zero3_a_crash_is_named_with_the_students_line_never_a_segfault(
    tmp_path, mistake
):
    """Mistakes that end the run (several read or write freed storage, a SIGSEGV before
    zerobook.labs.freed): the run still reports, its failure names the step, the student's
    line where there is one, and what to do; what finished before still counts."""
    old, new, where, named = ZERO3_CRASHES[mistake]
    student = planted(tmp_path, "zero3", mistake, old, new)
    run = zb.grading.run_part("zero3", student, "train", nproc=3, echo=False)
    said = zb.grading.failure(run)
    assert said.startswith(f"the run failed {where}"), said
    assert named in said, said
    assert all(r["parity"] is None for r in run.ranks)
    if "step 1" in where:  # step 0 finished on every rank: its tests still read it
        assert [len(r["steps"]) for r in run.ranks] == [1, 1, 1]


def test_zero3_gradients_never_averaged_or_never_waited_are_named_where_they_are(
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
