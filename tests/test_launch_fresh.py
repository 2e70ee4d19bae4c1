"""zb.torchrun's fresh path (zerobook.launcher.start_method), as macOS takes it, forced here on Linux with
ZEROBOOK_START=fresh: each rank a new interpreter under a watcher, no zygote, no fork after
threads, no parent-death signal, no torchrun --tee. Every promise of the launcher, kept."""

import sys
import time
from pathlib import Path

import psutil
import pytest

import zerobook as zb
from conftest import ROOT, processes_running
from test_launch import interrupted, never_arrives, notebook_launching, times_out
from zerobook.launcher import start_method

pytestmark = pytest.mark.launch


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setenv(start_method.START_ENV, start_method.FRESH)


def test_the_start_method_is_fork_on_linux_fresh_elsewhere_and_a_setting_chooses(
    monkeypatch,
):
    monkeypatch.delenv(start_method.START_ENV)
    for platform, method in (
        ("linux", "fork"),
        ("darwin", "fresh"),
        ("win32", "fresh"),
    ):
        monkeypatch.setattr(sys, "platform", platform)
        assert start_method.chosen() == method
    monkeypatch.setenv(start_method.START_ENV, "fork")
    with pytest.raises(ValueError, match="Linux only .* ZEROBOOK_START=fresh"):
        start_method.chosen()  # still darwin: fork is not offered there
    monkeypatch.setenv(start_method.START_ENV, "spawn")
    with pytest.raises(ValueError, match="'spawn': use 'fork' .* or 'fresh'"):
        start_method.chosen()


def test_fresh_ranks_report_back_with_their_output_tagged_as_it_is_printed(capsys):
    result = zb.torchrun("zerobook.runs.hello", nproc=4)
    shown = capsys.readouterr().out
    assert [r["total"] for r in result.ranks] == [10.0] * 4
    for rank in range(4):
        assert f"[rank{rank}] contributed {rank + 1}, all-reduce gave 10" in shown
    assert (
        "[rank0] [zerobook] backend=gloo" in shown and shown.count("backend=gloo") == 1
    )
    assert all(line.startswith("[rank") for line in shown.splitlines())
    assert result.output(3) == "contributed 4, all-reduce gave 10"


def test_each_fresh_rank_is_a_new_interpreter_under_its_watcher():
    result = zb.torchrun(ROOT / "tests/targets/rank_origin.py", nproc=2, echo=False)
    for rank in result.ranks:
        command = " ".join(rank["cmdline"])
        assert (
            "zerobook.launcher.rank_entry --started-fresh" in command
        )  # started, not forked
        assert not rank["torch_preloaded"]  # it imported torch itself
        assert rank["sigterm_default"] and rank["sigint_python"]
        assert rank["init_barrier"] == 1


def test_a_fresh_rank_that_raises_is_named_with_its_traceback_and_last_lines(
    unique_target,
):
    script = unique_target("raise_on_rank.py")
    with pytest.raises(zb.LaunchError) as caught:
        zb.torchrun(script, nproc=3, args=["--rank", "2"], echo=False)
    error = caught.value
    assert error.rank == 2
    assert str(error).startswith("rank 2 failed: ValueError: planted failure on rank 2")
    assert f'File "{script}", line' in str(error) and "raise ValueError" in str(error)
    assert processes_running(str(script)) == []


def test_a_fresh_rank_killed_by_a_signal_is_named_with_its_stack(unique_target):
    """Its watcher records the signal (no rank can) and passes on the faulthandler's stack."""
    script = unique_target("segfault_on_rank.py")
    with pytest.raises(zb.LaunchError) as caught:
        zb.torchrun(script, nproc=2, echo=False)
    assert caught.value.rank == 1
    assert str(caught.value).startswith("rank 1 died: killed by SIGSEGV")
    assert "string_at" in str(caught.value)
    assert processes_running(str(script)) == []


def test_a_fresh_collective_that_never_completes_fails_within_its_timeout(
    unique_target,
):
    never_arrives(unique_target("wait_forever.py"), collective_timeout=8)


def test_a_fresh_run_that_times_out_says_where_each_rank_was_and_leaves_nothing(
    unique_target,
):
    times_out(unique_target("wait_forever.py"))


def _left(script: Path, within: float) -> list:
    deadline = time.monotonic() + within
    while processes_running(str(script)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_running(str(script))
    for p in left:  # a failing run must not leave them to the next test
        p.kill()
    return left


def test_an_interrupted_fresh_run_leaves_nothing(unique_target, tmp_path):
    script = unique_target("wait_forever.py")
    interrupted(
        notebook_launching(script, tmp_path, 5), script
    )  # agent, 2 watchers, 2 ranks


def test_a_notebook_killed_outright_leaves_no_fresh_process_behind(
    unique_target, tmp_path
):
    """No parent-death signal on this path: the agent, each watcher and each rank see their
    parent gone (zerobook.launcher.lifeline) and stop."""
    script = unique_target("wait_forever.py")
    parent = notebook_launching(script, tmp_path, 5)  # agent, 2 watchers, 2 ranks
    family = psutil.Process(parent.pid).children(recursive=True)
    assert not any("zygote_main" in " ".join(p.cmdline()) for p in family)
    parent.kill()
    parent.wait(timeout=10)
    assert _left(script, 15) == []
