"""Sharded checkpoints (torch.distributed.checkpoint) under FSDP2, with a rank killed mid-run.

The recovery itself — torchrun restarting the job, training resuming from the last checkpoint bit
for bit, a checkpoint saved on 4 ranks loaded on 2 — is asserted by the cells of
chapters/checkpoint_resume.ipynb, which nbval runs with the tests: not run twice here."""

import pytest

import zerobook as zb

pytestmark = (
    pytest.mark.launch
)  # starts ranks with torchrun (make test-quick leaves it out)

LAB = "zerobook.runs.dcp_resume"


def run(directory, nproc: int, *args, **kwargs) -> list[dict]:
    return zb.torchrun(
        LAB, nproc=nproc, echo=False, args=["--dir", directory, *args], **kwargs
    ).ranks


def test_a_killed_rank_without_restarts_fails_the_run_naming_it(tmp_path):
    try:
        run(
            tmp_path, 2, "--steps", 10, "--every", 3, "--kill-rank", 1, "--kill-step", 2
        )
    except zb.LaunchError as error:
        assert error.rank == 1 and "SIGKILL" in str(error)
    else:
        raise AssertionError("the run should have failed")
