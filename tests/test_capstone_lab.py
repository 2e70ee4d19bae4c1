"""The capstone lab's feedback on planted mistakes: each fails the part it breaks, saying what
differs (runs shortened with hidden parameters: 40 steps, the curves compared over 30, a
checkpoint every 5 steps, the kill at step 15's)."""

import json

import pytest

import zerobook as zb
from conftest import ROOT
from zerobook.labs import capstone_checks
from zerobook.labs.harness import PARAMS_ENV

pytestmark = [pytest.mark.launch, pytest.mark.slow]
SHORT = {"steps": 40, "prefix": 30, "every": 5, "kill_at": 15}
CLIP_SUM = "        total += (piece.grad**2).sum()\n"


def planted(tmp_path, monkeypatch, *pairs: str) -> str:
    """The capstone's reference file with each (old, new) of `pairs` replaced."""
    source = zb.grading.reference_script(ROOT / "labs", "capstone")
    for old, new in zip(pairs[::2], pairs[1::2]):
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    student = tmp_path / "capstone_student.py"
    student.write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(PARAMS_ENV, json.dumps(SHORT))
    return str(student)


def launch(student: str, part: str) -> list[dict]:
    restarts = 1 if part == "resume" else 0
    run = zb.grading.run_part("capstone", student, part, nproc=3, debug=False,
                              max_restarts=restarts, timeout=300)  # fmt: skip
    return run.ranks


def test_a_norm_summed_in_another_order_is_named_with_its_step(tmp_path, monkeypatch):
    """The global norm summed backwards: the same number to a few ulps, so the clipping
    part names the step and says it is the order; the curves part points at it."""
    student = planted(
        tmp_path,
        monkeypatch,
        "    for piece in pieces:\n" + CLIP_SUM,
        "    for piece in reversed(pieces):\n" + CLIP_SUM,
    )
    reports = launch(student, "train")
    (clip,) = capstone_checks.clip_problems(reports)
    assert "summed in another order" in clip and "step " in clip, clip
    (curve,) = capstone_checks.curve_problems(reports)[:1]
    assert "the clipped norms part first" in curve, curve
    assert not capstone_checks.kept_problems(reports)


def test_a_norm_of_this_ranks_pieces_only_is_not_the_global_norm(tmp_path, monkeypatch):
    student = planted(tmp_path, monkeypatch, "    dist.all_reduce(total)\n", "")
    (clip,) = capstone_checks.clip_problems(launch(student, "train"))
    assert "rank 0, step 0:" in clip and "not the global norm" in clip, clip


def test_a_shard_loaded_without_its_optimizer_state_resumes_off_the_curve(
    tmp_path, monkeypatch
):
    """load_shard that restores the master pieces but not AdamW's moments: resumed from the
    right checkpoint, the curve parts at once, and the message says what to save."""
    student = planted(
        tmp_path,
        monkeypatch,
        '    zero3.optimizer.load_state_dict(state["optimizer"])\n',
        "",
    )
    trained = launch(student, "train")
    (problem,) = capstone_checks.resume_problems(launch(student, "resume"), trained)
    # the first resumed step's weights are right; its update, without the moments, is not
    resumed = SHORT["kill_at"] - SHORT["every"]
    assert f"rank 0, step {resumed + 1}: the resumed loss" in problem, problem
    assert "the optimizer's state" in problem, problem


def test_a_capstone_that_takes_the_courses_zero3_scores_nothing(tmp_path, monkeypatch):
    student = planted(
        tmp_path,
        monkeypatch,
        "import torch\n",
        "import torch\nfrom zerobook.zero import Zero3AdamW  # noqa: F401\n",
    )
    with pytest.raises(
        zb.LaunchError, match="zerobook.zero is not a module this lab's file may import"
    ):
        launch(student, "train")


def test_a_capstone_that_patches_the_held_out_loss_scores_nothing(
    tmp_path, monkeypatch
):
    """A file that replaces the harness's held-out measure (to pass the target) cannot
    import the module that holds it: the lab's rules refuse it, naming the line."""
    student = planted(
        tmp_path,
        monkeypatch,
        "import torch\n",
        "import torch\nimport zerobook.train.capstone_train as _ct\n\n"
        "_ct.held_out_bits = lambda *args: 0.0\n",
    )
    refused = "zerobook.train.capstone_train is not a module this lab's file may import"
    with pytest.raises(zb.LaunchError, match=refused):
        launch(student, "train")


FORGERIES = ROOT / "tests" / "forgeries"


def forged(tmp_path, monkeypatch, name: str) -> str:
    """A second red team's capstone file (tests/forgeries/), as a student's."""
    student = tmp_path / "capstone_student.py"
    student.write_text((FORGERIES / f"{name}.py").read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(PARAMS_ENV, json.dumps(SHORT))
    return str(student)


def test_a_capstone_without_communication_fails_at_its_first_step(
    tmp_path, monkeypatch
):
    """It scored 12/12: its DDP's finish() did nothing and its curves agreed with its ZeRO-3,
    as wrong; a hook answered the held-out bytes. The harness now checks that DDP's gradients
    are every rank's mean, and measures the held-out loss on weights it copies: its DDP's
    run fails at its first step (reported, zerobook.labs.crash), and its ZeRO-3, which runs
    all the same, ends the launch: its ranks compute with weights of their own."""
    student = forged(tmp_path, monkeypatch, "capstone_no_communication")
    with pytest.raises(zb.LaunchError, match="your ZeRO-3: after training, rank"):
        launch(student, "train")


def test_a_ddp_presented_as_zero3_keeps_more_than_its_share(tmp_path, monkeypatch):
    """Its full replicas, kept in a module-level dict, are counted now (12/12 before)."""
    reports = launch(forged(tmp_path, monkeypatch, "capstone_ddp_as_zero3"), "train")
    (problem, *_) = capstone_checks.kept_problems(reports)
    assert "more than 16 Psi/N" in problem, problem
