"""The ZeRO-1/2 lab's (Lab 4) harness against wrong student code: each mistake loses only its
parts and is named."""

import pytest

import zerobook as zb
from lab_helpers import planted

# starts ranks with torchrun; the labs' feedback on planted mistakes: make test-grading
pytestmark = [pytest.mark.launch, pytest.mark.slow]


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


def zero_problems(run) -> dict[str, list[str]]:
    """Each graded part of Lab 4's run -> the problems found on any rank, optimizer, step."""
    from zerobook.labs import zero_events as ze
    from zerobook.labs import zero_held as zh

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
ZERO_MISTAKES = {
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


@pytest.mark.parametrize("mistake", sorted(ZERO_MISTAKES))
def test_zero_each_mistake_loses_only_its_parts_and_is_named(tmp_path, mistake):
    """Gradients freed only in zero_grad(), an all-reduce for the reduce-scatter, a
    bucket waited on in its hook, buckets never retired before finish(), retired a
    launch early, or kept after their wait, weight decay on the 1-D pieces: each fails
    its own parts, the first naming the mistake; a mean taken before the sum fails
    none."""
    replacements, failing, named = ZERO_MISTAKES[mistake]
    student = planted(tmp_path, "zero", mistake, *replacements)
    run = zb.grading.run_part("zero", student, "train", nproc=3)
    found = zero_problems(run)
    assert {part for part, problems in found.items() if problems} == failing, found
    if mistake == "never_retires":  # what the lab says: above one full set of gradients
        report = run.ranks[0]
        from zerobook.labs import zero_held

        step, full = (
            report["runs"]["AdamW"]["steps"][0],
            4 * sum(report["params"].values()),
        )
        assert max(h[1] for h in step["held"]) > full
        assert sum(zero_held.limit(step, report)) < full  # "well under 4 Psi"
    assert named is None or any(named in p for part in failing for p in found[part]), (
        found
    )


def test_zero_a_crash_in_step_keeps_its_backward_and_a_strided_piece_is_named(tmp_path):
    """Issue 67: a padded all-gather copied back whole raises in step 0's step(): the run
    names that line and the padding, and step 0's backward is still checked (held,
    buckets, overlap, the reduce-scatters' traffic: all right); a piece kept as a column
    of view(-1, N) is named as such, not as no piece of any parameter."""
    from careless.zero import CLASS
    from zerobook.labs import zero_events as ze
    from zerobook.labs import zero_held as zh

    pad = planted(tmp_path, "zero", "pad", *CLASS["gather_keeps_padding"][0])
    run = zb.grading.run_part("zero", pad, "train", nproc=3)
    said = zb.grading.failure(run)
    assert "the AdamW run's step 0, in step(), rank 0" in said, said
    assert "`param.copy_(full.view_as(param))`" in said and "padding" in said, said
    ranks = tuple(range(len(run.ranks)))
    for report in run.ranks:
        assert [s["stepped"] for s in report["runs"]["AdamW"]["steps"]] == [False]
    for check in (zh.held_problems, ze.bucket_problems, ze.overlap_problems):
        assert ze.first_problems(run.ranks, check, ranks) == [], check
    assert ze.first_problems(run.ranks, ze.traffic_problems, ranks) == []
    strided = planted(tmp_path, "zero", "strided", *CLASS["strided_piece"][0])
    run = zb.grading.run_part("zero", strided, "train", nproc=3)
    for rank, report in enumerate(run.ranks):
        found = ze.state_and_layout(report, rank)
        assert f"elements {rank}, {rank} + N, {rank} + 2N" in found[0], found
        assert "a contiguous chunk" in found[0], found


def test_zero_the_packages_flat_layout_fails_the_layout_part_naming_it(tmp_path):
    student = tmp_path / "zero_student.py"
    student.write_text(FLAT_ZERO)
    found = zero_problems(zb.grading.run_part("zero", str(student), "train", nproc=3))
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
def test_zero_a_file_that_imports_a_forbidden_module_fails_the_whole_run(
    tmp_path, module
):
    student = planted(
        tmp_path,
        "zero",
        "borrows",
        "import torch\n",
        f"import torch\nimport {module}  # noqa: F401\n",
    )
    refused = f"{module} is not a module this lab's file may import"
    with pytest.raises(zb.LaunchError, match=refused):
        zb.grading.run_part("zero", student, "train", nproc=3)
