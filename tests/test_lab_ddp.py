"""The DDP lab's (Lab 2) harness against wrong student code: each mistake loses only its parts and
is named."""

import pytest

import zerobook as zb
from lab_helpers import planted

# starts ranks with torchrun; the labs' feedback on planted mistakes: make test-grading
pytestmark = [pytest.mark.launch, pytest.mark.slow]


PLANNED_BUCKETS = '''
import torch
import torch.distributed as dist


class BucketedDDP:
    """The chapter's design: buckets planned once from model.parameters() reversed, each
    sent when all its gradients have arrived (zerobook.data_parallel.ddp.OverlappedAllReduce, copied)."""

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
    from zerobook.labs import bucket_events as be

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


def test_ddp_the_chapters_planned_buckets_lose_only_the_bucket_points(tmp_path):
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
def test_ddp_a_bucket_waited_on_at_once_or_divided_before_its_wait_loses_only_those_points(
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


def test_ddp_a_last_bucket_never_sent_keeps_what_step_0_showed_and_names_it(tmp_path):
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


def test_ddp_one_rank_failing_mid_backward_is_named_first_and_ends_every_rank(
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
    # the student's own raise: its type and their line, not its message (zerobook.labs.crash)
    raised = "`raise ValueError('rank one alone')`: ValueError, raised by your"
    assert raised in said, said
    assert [len(r["steps"]) for r in run.ranks] == [1, 1, 1]
    assert [r["failed"]["lost_peer"] for r in run.ranks] == [True, False, True]


def test_ddp_a_hook_given_the_gradient_is_named_with_the_hook_to_use(tmp_path):
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


def test_ddp_gradients_divided_before_the_all_reduce_lose_only_parity_saying_why(
    tmp_path,
):
    """PyTorch DDP's own mean (each gradient divided by N, then summed): the buckets, the
    overlap and the waits are right and pass; parity fails, explaining the lab's contract."""
    from zerobook.labs import bucket_events

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


def test_ddp_a_file_that_imports_the_courses_ddp_fails_the_whole_run(tmp_path):
    student = planted(
        tmp_path,
        "ddp",
        "borrows",
        "import torch\n",
        "import torch\nfrom zerobook.data_parallel.ddp import OverlappedAllReduce  # noqa: F401\n",
    )
    refused = "zerobook.data_parallel.ddp is not a module this lab's file may import"
    with pytest.raises(zb.LaunchError, match=refused):
        zb.grading.run_part("ddp", student, "train", nproc=3)
