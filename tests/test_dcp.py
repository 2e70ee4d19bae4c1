"""Sharded checkpoints (torch.distributed.checkpoint) under FSDP2: a rank killed mid-run, torchrun
restarting the job, training resuming from the last checkpoint bit for bit; and a checkpoint saved
on 4 ranks loaded on 2."""
import zerobook as zb

LAB = "zerobook.labs.dcp_resume"


def run(directory, nproc: int, *args, **kwargs) -> list[dict]:
    return zb.torchrun(LAB, nproc=nproc, echo=False, args=["--dir", directory, *args], **kwargs).ranks


def test_a_killed_rank_is_restarted_and_the_run_resumes_bit_identically(tmp_path):
    never = run(tmp_path / "never", 2, "--steps", 10, "--every", 3)
    killed = run(tmp_path / "killed", 2, "--steps", 10, "--every", 3, "--kill-rank", 1, "--kill-step", 7,
                 max_restarts=1)
    for plain, resumed in zip(never, killed):
        assert plain["restarts"] == 0 and plain["start"] == 0 and len(plain["losses"]) == 10
        assert resumed["restarts"] == 1 and resumed["start"] == 6  # the last checkpoint before step 7
        assert resumed["losses"] == {k: v for k, v in plain["losses"].items() if int(k) >= 6}
        assert resumed["digests"] == plain["digests"]


def test_a_killed_rank_without_restarts_fails_the_run_naming_it(tmp_path):
    try:
        run(tmp_path, 2, "--steps", 10, "--every", 3, "--kill-rank", 1, "--kill-step", 2)
    except zb.LaunchError as error:
        assert error.rank == 1 and "SIGKILL" in str(error)
    else:
        raise AssertionError("the run should have failed")


def test_a_checkpoint_saved_on_four_ranks_loads_on_two(tmp_path):
    saved = run(tmp_path, 4, "--steps", 6, "--every", 6)
    loaded = run(tmp_path, 2, "--steps", 6)  # starts at the checkpoint's step: nothing left to train
    assert {r["start"] for r in loaded} == {6} and not loaded[0]["losses"]
    assert loaded[0]["digests"] == saved[0]["digests"] and loaded[0]["digests"]["moment_tensors"] > 0
    resumed = run(tmp_path, 2, "--steps", 8)  # and training goes on, on 2 ranks
    assert set(resumed[0]["losses"]) == {"6", "7"}
