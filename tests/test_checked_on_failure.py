"""A lab run's collectives are checked across ranks only when the run failed in one
(zerobook.grading.checked_on_failure): what is launched again, and what is not."""

import pytest

from zerobook.grading import checked_on_failure
from zerobook.launcher.launch import LaunchError, RunResult, RunTimedOut


def run_of(*failed) -> RunResult:
    return RunResult(
        ranks=[{"failed": f} if f else {} for f in failed], log="", seconds=0.0
    )


def launches(first):
    """A fake launch: `first` (a RunResult, or an exception to raise) without the check, a
    run that says it was checked with it; and the list of what was asked."""
    asked = []

    def launch(detail: bool):
        asked.append(detail)
        if detail:
            return run_of({"error": "Detected mismatch between collectives"})
        if isinstance(first, BaseException):
            raise first
        return first

    return launch, asked


LOST = {"error": "Connection closed by peer", "lost_peer": True}
TIMED = {"error": "Timed out waiting 12000ms for send operation", "lost_peer": True}
OWN = {"error": "AttributeError: 'NoneType' object has no attribute 'numel'"}


@pytest.mark.parametrize(
    "first, again",
    [
        (run_of(None, None, None), False),  # every rank finished: never checked
        (
            run_of(OWN, LOST, LOST),
            False,
        ),  # the student's own error: the check adds nothing
        (
            run_of(LOST, LOST, None),
            True,
        ),  # a collective no peer joined, one rank skipped it
        (LaunchError("rank 1 died: killed by SIGABRT"), True),  # gloo aborts on sizes
        (
            run_of(TIMED, TIMED),
            False,
        ),  # every rank waited in a collective: said already
    ],
    ids=["passed", "own_error", "lost_peers", "aborted", "deadlock"],
)
def test_a_run_is_checked_again_only_when_it_failed_in_a_collective(first, again):
    launch, asked = launches(first)
    run = checked_on_failure(launch, debug=True)
    assert asked == ([False, True] if again else [False])
    if again:
        assert "mismatch" in run.ranks[0]["failed"]["error"]


def test_a_run_that_timed_out_or_asked_for_no_check_is_not_launched_again():
    for first, debug in [
        (RunTimedOut("timed out after 60 s"), True),
        (LaunchError("rank 1 died"), False),
    ]:
        launch, asked = launches(first)
        with pytest.raises(LaunchError):
            checked_on_failure(launch, debug=debug)
        assert asked == [False]
    launch, asked = launches(run_of(LOST, LOST))
    assert checked_on_failure(launch, debug=False).ranks[0]["failed"] is LOST
    assert asked == [False]
