"""The bug zoo's (Lab 8) harness against the loops as handed over, careless repairs, and an
instructor's hidden parameters: each wrong loop fails its own part, named by the collective
that differs or by how far its weights are from a correct loop's."""

import json

import pytest

import zerobook as zb
from conftest import ROOT
from lab_helpers import lab_solution, planted
from zerobook.labs.harness import PARAMS_ENV

# starts ranks with torchrun; the labs' feedback on planted mistakes: make test-grading
pytestmark = [pytest.mark.launch, pytest.mark.slow]
MISMATCH = "Detected mismatch between collectives on ranks"


def broken(tmp_path) -> str:
    """bugs_student.py, the three loops as the lab hands them over."""
    notebook = json.loads((ROOT / "labs" / "bug_zoo" / "bug_zoo.ipynb").read_text())
    cell = next(
        c for c in notebook["cells"] if c["metadata"]["nbgrader"]["grade_id"] == "bugs"
    )
    path = tmp_path / "bugs_student.py"
    path.write_text("".join(cell["source"]).split("\n", 1)[1])
    return str(path)


def failure(student: str, part: str, nproc: int = 3) -> str:
    with pytest.raises(zb.LaunchError) as failed:
        zb.grading.run_part("bug_zoo", student, part, nproc=nproc, echo=False)
    return str(failed.value)


@pytest.mark.parametrize("part", ["skip", "uneven"])
def test_a_loop_as_handed_over_that_hangs_is_named_by_its_collectives_and_line(
    tmp_path, part
):
    """The overflow skipped on one rank, and uneven shares: the checked run names collectives
    that differ, one of them the harness's all-gather after the loop (which rank the summary
    leads with, one still in ddp_step's all-reduce or one already past its loop, is a race)."""
    said = failure(broken(tmp_path), part)
    assert MISMATCH in said and "GATHER" in said, said  # the all-gather, or its gather


def test_replicas_seeded_apart_finish_but_differ_from_a_correct_loop_and_each_other(
    tmp_path,
):
    run = zb.grading.run_part(
        "bug_zoo", broken(tmp_path), "replicas", nproc=3, echo=False
    )
    assert all("differs from the course's loop" in r["verdict"] for r in run.ranks)
    assert all(r["verdict"].startswith("the replicas started apart") for r in run.ranks)
    assert len({r["fingerprint"] for r in run.ranks}) == 3


def test_a_repair_that_drops_only_the_partial_batch_still_hangs_on_21_20_20_samples(
    tmp_path,
):
    student = planted(
        tmp_path,
        "bug_zoo",
        "partial",
        "    steps = len(x) // (n * batch)  # the same on every rank\n"
        "    x, y = x[rank::n], y[rank::n]\n",
        "    x, y = x[rank::n], y[rank::n]\n    steps = len(x) // batch\n",
    )
    said = failure(student, "uneven")
    assert MISMATCH in said, said


def test_steps_counted_over_the_ranks_share_are_named_as_too_few(tmp_path):
    """len(x) // (N * batch) after x became the rank's share: every rank agrees, on 2 steps."""
    student = planted(
        tmp_path,
        "bug_zoo",
        "share",
        "    steps = len(x) // (n * batch)  # the same on every rank\n"
        "    x, y = x[rank::n], y[rank::n]\n",
        "    x, y = x[rank::n], y[rank::n]\n    steps = len(x) // (n * batch)\n",
    )
    run = zb.grading.run_part("bug_zoo", student, "uneven", nproc=3, echo=False)
    said = run.ranks[0]["verdict"]
    assert "with 55 samples: took 2 steps where a correct loop takes 6" in said, said


def test_a_loss_zeroed_instead_of_skipped_is_named_by_the_weights_it_spoils(tmp_path):
    """NaN times 0 is NaN: every rank's weights turn NaN, which the verdict names."""
    student = planted(
        tmp_path,
        "bug_zoo",
        "zeroed",
        "        bad = torch.tensor([float(not torch.isfinite(loss))], device=loss.device)\n"
        "        dist.all_reduce(bad)  # every rank learns if any rank's loss overflowed\n"
        "        if bad.item():\n            continue\n",
        "        if not torch.isfinite(loss):\n            loss = loss * 0\n",
    )
    run = zb.grading.run_part("bug_zoo", student, "skip", nproc=3, echo=False)
    assert all("holds NaN or inf" in r["verdict"] for r in run.ranks), run.ranks


def test_replicas_equal_to_each_other_but_not_built_from_the_seed_still_fail(tmp_path):
    """Seeded after the model is built: the ranks agree (the harness's random state is the
    same on each), so only the comparison with a correct loop finds it."""
    student = planted(
        tmp_path,
        "bug_zoo",
        "late_seed",
        "    torch.manual_seed(seed)  # the same on every rank: the replicas start equal\n"
        "    model = make_model()\n",
        "    model = make_model()\n    torch.manual_seed(seed)\n",
    )
    run = zb.grading.run_part("bug_zoo", student, "replicas", nproc=3, echo=False)
    assert len({r["fingerprint"] for r in run.ranks}) == 1
    assert all("differs from the course's loop" in r["verdict"] for r in run.ranks)
    assert all("started equal but not from `seed`" in r["verdict"] for r in run.ranks)


FLAG = (
    "        dist.all_reduce(bad)  # every rank learns if any rank's loss overflowed\n"
)


def test_an_overflow_flag_broadcast_from_rank_0_is_named_by_the_step_it_missed(
    tmp_path,
):
    """Rank 0's overflow (step 3 on 3 ranks) is skipped by all, rank 1's (step 4) by none:
    every rank names step 4 and says it heard rank 0's flag alone."""
    student = planted(
        tmp_path, "bug_zoo", "broadcast", FLAG, "        dist.broadcast(bad, 0)\n"
    )
    run = zb.grading.run_part("bug_zoo", student, "skip", nproc=3, echo=False)
    said = run.ranks[0]["verdict"]
    assert said.startswith("at step 4 rank 1's loss was not finite, and this rank"), (
        said
    )
    assert "rank 0's flag alone" in said and "holds NaN or inf" in said, said


DIVIDE = "        dist.all_reduce(p.grad)\n        p.grad /= dist.get_world_size()\n"


def test_a_ddp_step_that_divides_first_and_steps_with_add_keeps_every_part(tmp_path):
    """Each rank's gradient divided by N before the all-reduce sums them (PyTorch DDP's
    order), and the update as add_(alpha): other bits (1.5e-8 apart), the same mean; the
    harness's loop runs that way too, and the weights are equal bit for bit."""
    student = planted(
        tmp_path,
        "bug_zoo",
        "first",
        DIVIDE,
        "        p.grad /= dist.get_world_size()\n        dist.all_reduce(p.grad)\n",
        "            p -= lr * p.grad\n",
        "            p.add_(p.grad, alpha=-lr)\n",
    )
    for part in ("skip", "uneven", "replicas"):
        run = zb.grading.run_part("bug_zoo", student, part, nproc=3, echo=False)
        assert all(not r["verdict"] for r in run.ranks), (part, run.ranks)


def test_a_ddp_step_that_never_divides_is_named_as_stepping_with_the_sum(tmp_path):
    """A real mistake in the helper still fails, and is named: not a rounding."""
    student = planted(
        tmp_path,
        "bug_zoo",
        "sum",
        DIVIDE,
        "        dist.all_reduce(p.grad)\n",
    )
    run = zb.grading.run_part("bug_zoo", student, "replicas", nproc=3, echo=False)
    said = run.ranks[0]["verdict"]
    assert "steps with the sum of the ranks' gradients, not their mean" in said, said


def test_under_hidden_parameters_the_reference_scores_and_the_broken_loops_still_fail(
    tmp_path, monkeypatch
):
    hidden = {"seed": 3, "inf_steps": [2, 4], "extras": [2, 8], "steps": 5}
    reference = tmp_path / "bug_zoo_student.py"
    reference.write_text(lab_solution("bug_zoo"))
    bugs = broken(tmp_path)
    monkeypatch.setenv(PARAMS_ENV, json.dumps(hidden))
    for part in ("skip", "uneven", "replicas"):
        run = zb.grading.run_part("bug_zoo", str(reference), part, nproc=3, echo=False)
        assert all(not r["verdict"] for r in run.ranks), (part, run.ranks)
        assert len({r["fingerprint"] for r in run.ranks}) == 1
    assert run.ranks[0]["skipped"] == 0
    skip = zb.grading.run_part("bug_zoo", str(reference), "skip", nproc=3, echo=False)
    assert skip.ranks[0]["skipped"] == 2  # both inf steps skipped by every rank
    for part in ("skip", "uneven"):
        assert MISMATCH in failure(bugs, part)


def test_the_skip_answer_credits_the_scaler_that_all_reduces_found_inf():
    """Issue 68: torch's GradScaler runs no collective (DDP's ranks agree because they check
    gradients already all-reduced); FSDP's ShardedGradScaler all-reduces found_inf. The
    model answer says which, and torch's sources say so too."""
    import inspect

    from torch.amp import grad_scaler
    from torch.distributed.fsdp import sharded_grad_scaler

    assert "all_reduce" not in inspect.getsource(grad_scaler)
    sharded = inspect.getsource(sharded_grad_scaler)
    assert "dist.all_reduce(" in sharded and "found_inf" in sharded
    cells = json.loads((ROOT / "labs/bug_zoo/bug_zoo.ipynb").read_text())["cells"]
    answer = next(
        "".join(c["source"])
        for c in cells
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "diagnosis_skip"
    )
    assert "`ShardedGradScaler` does with its `found_inf`" in answer
    assert "`GradScaler` does with its `found_inf`" not in answer.replace(
        "`ShardedGradScaler` does", ""
    )
