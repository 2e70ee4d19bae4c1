"""The FSDP2 lab's (Lab 6) harness against wrong student code."""

import re
from pathlib import Path

import pytest

import zerobook as zb
from lab_helpers import lab_solution, planted
from careless.fsdp2 import CLASS as FSDP2
from zerobook.labs.fsdp2 import CONFIG
from zerobook.train.models import GPT

# starts ranks with torchrun; the labs' feedback on planted mistakes: make test-grading
pytestmark = [pytest.mark.launch, pytest.mark.slow]


def test_fsdp2_checkpoint_taken_from_its_guards_closure_fails_the_part(tmp_path):
    """The course's DCP save, taken from its guard's closure: the lab's rules refuse the
    import and the closure before a line runs (zerobook.trust.policy)."""
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
    said = str(caught.value)
    assert "`from zerobook import sharded_checkpoint`: zerobook is not a module" in said
    assert ".__closure__ is a library's or the grader's inside" in said


def test_fsdp2_checkpoint_kept_in_memory_is_not_found(tmp_path):
    """The second red team's save kept the state in a module global and wrote nothing (3/3):
    the harness loads with the file imported again, which has none of it."""
    student = tmp_path / "fsdp2_student.py"
    forged = Path(__file__).parent / "forgeries" / "fsdp2_checkpoint_in_memory.py"
    student.write_text(forged.read_text())
    run = zb.grading.run_part("fsdp2", str(student), "checkpoint", nproc=2, echo=False)
    for (
        report
    ) in run.ranks:  # its load raised; the disk holds nothing: the save is named
        assert sorted(report["not_on_disk"]) == sorted(WEIGHTS + MOMENTS)
        assert report["loaded"] != report["saved"]


FORGED = (
    Path(__file__).parent / "forgeries" / "checkpoint"
)  # our red team's, 2026-12-07
WEIGHTS = [name for name, _ in GPT(CONFIG).named_parameters()]
MOMENTS = [f"{name} {k}" for name in WEIGHTS for k in ("exp_avg", "exp_avg_sq")]


def checkpoint_of(student: str):
    return zb.grading.run_part("fsdp2", student, "checkpoint", nproc=2, echo=False)


def forged(tmp_path, name: str) -> str:
    student = tmp_path / name / "fsdp2_student.py"
    student.parent.mkdir()
    student.write_text((FORGED / f"{name}.py").read_text())
    return str(student)


@pytest.mark.parametrize(
    "attack", ["copy_hung_on_the_model", "int_views_on_the_model", "one_offset_read"]
)
def test_a_load_that_takes_a_copy_hung_on_the_model_finds_none(tmp_path, attack):
    """Our red team's loads that never read the disk: each took a copy the first import hung
    on every model through shard() (one beside int32 views of every tensor, same bytes and so
    the same digests; one reading a single tensor of the shifted copy for its offset). Each
    model is now built by the import that loads it, which holds no copy, and the load raises;
    where the save also left tensors out, the part names the save (issue 67)."""
    try:
        run = checkpoint_of(forged(tmp_path, attack))
    except (
        zb.LaunchError
    ) as exc:  # the disk held everything: the load's error is its own
        assert re.search(r"in load: .*(AttributeError|KeyError)", str(exc)), exc
    else:  # its load raised over a save that left tensors out: the save is named
        for report in run.ranks:
            assert report["not_on_disk"] and report["loaded"] != report["saved"]


@pytest.mark.parametrize(
    "attack", ["save_rewrites_to_absorb_the_shift", "no_step_counts"]
)
def test_a_checkpoint_that_is_not_what_training_left_fails_the_round_trip(
    tmp_path, attack
):
    """Our second red team's: a save that rewrote the model to values an offset rounds back to
    (digests are now taken before the save, and the shifted copy holds fresh random values),
    and a checkpoint without AdamW's step counts (now in the state digests)."""
    for report in checkpoint_of(forged(tmp_path, attack)).ranks:
        assert report["loaded"] != report["saved"]
        if attack == "save_rewrites_to_absorb_the_shift":
            assert sorted(report["not_on_disk"]) == sorted(WEIGHTS + MOMENTS)
        else:
            assert report["loaded"]["steps"] != report["saved"]["steps"]


def test_fsdp2_checkpoint_read_back_by_a_fresh_process(tmp_path):
    """A fresh process reads what save wrote (zerobook.labs.checkpoint_readback): a save of the
    weights alone leaves the moments off the disk; a load of the weights alone leaves the
    shifted copy's moments unread; int32 copies beside an honest checkpoint count for nothing
    (our red team's: their digests matched, never shifted, so an honest load failed), and a
    load that kept its first checkpoint for the second is a fresh import's each time: both pass."""
    pairs = FSDP2["weights_only_checkpoint"][0]  # the careless class's (save and load)
    for report in checkpoint_of(planted(tmp_path, "fsdp2", "saves", *pairs)).ranks:
        assert sorted(report["not_on_disk"]) == sorted(MOMENTS)
        assert report["not_read"] == [] and report["loaded"] != report["saved"]
    for report in checkpoint_of(planted(tmp_path, "fsdp2", "loads", *pairs[2:])).ranks:
        assert report["not_on_disk"] == [] and sorted(report["not_read"]) == sorted(
            MOMENTS
        )
        assert report["loaded"] != report["saved"]
    honest = checkpoint_of(forged(tmp_path, "int_copies_kept_between_loads"))
    for report in honest.ranks:
        assert report["not_on_disk"] == report["not_read"] == []
        assert report["loaded"] == report["saved"]


def test_fsdp2_fp32_communication_no_prefetch_or_one_unit_lose_those_points(tmp_path):
    """FSDP2 set up almost right: without the policy it trains alike but sends fp32; ignoring
    reduce_dtype reduces in bf16 when asked for fp32; without set_modules_to_forward_prefetch each
    block is gathered only when it starts; with fully_shard on the root alone the blocks are
    named as no units before anything runs."""
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
    run = zb.grading.run_part("fsdp2", whole, "memory,parity", nproc=2)
    said = "shard() left blocks.0, blocks.1, blocks.2 without fully_shard: fully_shard each"
    with pytest.raises(zb.grading.PartFailed, match=re.escape(said)):
        zb.grading.part_reports(run, "memory")


def test_fsdp2_root_left_fp16_swapped_prefetch_and_no_set_state_dict_are_told(tmp_path):
    """Issue 67: the root left out is named before torch fails inside it; fp16 compute is
    seen in the blocks' outputs; a swapped prefetch gathers more bytes, not twice (the
    dtype's ratio), and reduces as ours does; a load without set_state_dict restores the
    tensors (in place) but leaves the learning rate the fresh optimizer's."""
    plant = lambda name: planted(tmp_path, "fsdp2", name, *FSDP2[name][0])  # noqa: E731
    run = zb.grading.run_part(
        "fsdp2", plant("root_not_sharded"), "memory,parity", nproc=2
    )
    for part in ("memory", "parity"):
        with pytest.raises(zb.grading.PartFailed, match="left the root without"):
            zb.grading.part_reports(run, part)
    for report in checkpoint_of(plant("loads_without_set_state_dict")).ranks:
        assert report["loaded"] == report["saved"]  # the tensors: in place
        assert report["lr"] == {"saved": 5e-4, "loaded": 1e-3}
    run = zb.grading.run_part("fsdp2", plant("fp16_for_bf16"), "parity", nproc=2)
    for report in run.ranks:
        assert report["computed_in"] == ["float16"]
        assert report["losses"]["student"] != report["losses"]["ours"]
    run = zb.grading.run_part("fsdp2", plant("prefetch_swapped"), "traffic", nproc=2)
    ours, yours = run.ranks[0]["ours"], run.ranks[0]["student_bf16"]
    assert yours["reduce_scatter_tensor"] == ours["reduce_scatter_tensor"]
    gathered = yours["all_gather_into_tensor"] / ours["all_gather_into_tensor"]
    assert 1 < gathered < 2, gathered


def test_fsdp2_shares_one_launch_and_a_part_that_raises_fails_only_its_own(tmp_path):
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
    said += r"ueError\('no disk today'\)`: ValueError, raised by your code"
    with pytest.raises(zb.grading.PartFailed, match=said):
        zb.grading.part_reports(run, "checkpoint")
