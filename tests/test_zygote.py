"""The zygote (zerobook.launcher.zygote): each launch's agent is forked from one process per notebook
that has imported torch, and looks to everything else as if it had been started as the command.
A rank's ancestors: its watcher, its agent, the zygote, this process (the launcher). That the
zygote leaves with a notebook killed outright: tests/test_launch.py."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

import zerobook as zb
from conftest import ROOT, processes_running

pytestmark = pytest.mark.launch

TARGET = ROOT / "tests/targets/rank_origin.py"
WATCHER, AGENT, ZYGOTE, LAUNCHER = range(4)


def launch(**kwargs):
    return zb.torchrun(TARGET, nproc=2, echo=False, **kwargs).ranks


def test_launches_fork_their_agents_from_one_zygote_that_shows_each_agents_command():
    runs = [launch(), launch()]
    for ranks in runs:
        for rank in ranks:
            assert rank["ancestors"][LAUNCHER] == os.getpid()
            assert str(TARGET) in " ".join(rank["cmdline"])  # what ps and psutil show
            assert rank["cmdline"][1:3] == [
                "-c",
                zb.launcher.command.PRELOAD_AND_RUN_TORCHRUN,
            ]
            # the run's id, by which the launcher finds the run's processes to stop them
            assert rank["shown_run_id"] == rank["run_id"] is not None
            assert rank["torch_preloaded"] and rank["dynamo_preloaded"]
            assert rank["method_name_from"] == "zerobook.launcher.agent"
    assert len({r["ancestors"][ZYGOTE] for ranks in runs for r in ranks}) == 1
    assert len({r["ancestors"][AGENT] for ranks in runs for r in ranks}) == 2
    assert runs[0][0]["run_id"] != runs[1][0]["run_id"]


def test_an_environment_torch_reads_on_import_gets_its_own_zygote():
    """ATEN_CPU_CAPABILITY picks torch's kernels when torch is imported: a zygote started
    without it cannot serve a launch that sets it."""
    plain = launch()[0]["ancestors"][ZYGOTE]
    other = launch(env={"ATEN_CPU_CAPABILITY": "default"})[0]
    assert other["ancestors"][ZYGOTE] != plain
    assert other["ancestors"][LAUNCHER] == os.getpid()


def test_a_launch_whose_command_does_not_fit_the_zygotes_room_runs_as_the_command():
    """The agent shows the launch's command line in the room the zygote keeps for it; a
    longer one is started as the command (and shows it all)."""
    long = "x" * (zb.launcher.zygote.ROOM + 1)
    rank = zb.torchrun(TARGET, nproc=2, args=[long], echo=False).ranks[0]
    assert rank["ancestors"][ZYGOTE] == os.getpid()
    assert rank["cmdline"][-1] == long
    assert rank["shown_run_id"] == rank["run_id"] is not None


def test_a_zygote_that_died_is_replaced():
    zygote = psutil.Process(launch()[0]["ancestors"][ZYGOTE])
    zygote.send_signal(signal.SIGKILL)
    zygote.wait(timeout=10)
    assert launch()[0]["ancestors"][ZYGOTE] not in (zygote.pid, os.getpid())


def test_without_the_zygote_the_launcher_starts_each_agent_itself(monkeypatch):
    monkeypatch.setenv(zb.launcher.zygote.ZYGOTE_ENV, "0")
    ranks = launch()
    assert ranks[0]["ancestors"][ZYGOTE] == os.getpid()
    assert ranks[0]["shown_run_id"] == ranks[0]["run_id"] is not None
    assert ranks[0]["torch_preloaded"] and ranks[0]["dynamo_preloaded"]
    assert (
        ranks[0]["method_name_from"] == "zerobook.launcher.agent"
    )  # the command preloads too


def test_the_agents_caller_names_are_torchruns_own_without_inspecting_the_stack():
    """zerobook.launcher.agent.method_name gives what torchrun's get_method_name gives, at each
    depth, from a shallow stack too, reading no source file."""
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous

    torchruns = dynamic_rendezvous.get_method_name
    assert torchruns.__module__ == dynamic_rendezvous.__name__  # not mended here

    def outer(name_of):
        return middle(name_of)

    def middle(name_of):
        return name_of(1), name_of(2), name_of(3), name_of(10_000)

    here = "test_the_agents_caller_names_are_torchruns_own_without_inspecting_the_stack"
    assert outer(zb.launcher.agent.method_name) == outer(torchruns)
    assert outer(zb.launcher.agent.method_name) == (
        "middle",
        "outer",
        here,
        "no_method_name",
    )


def test_a_kernel_interrupt_stops_the_run_and_not_the_zygote(unique_target):
    """Jupyter interrupts a kernel by SIGINT to its process group: the run stops (the
    launcher's KeyboardInterrupt), and the zygote, in a session of its own, forks the next."""
    script = unique_target("wait_forever.py")
    code = (
        "import zerobook as zb\n"
        "try:\n"
        f"    zb.torchrun({str(script)!r}, nproc=2, collective_timeout=600)\n"
        "except zb.launcher.launch.LaunchInterrupted:\n"
        "    print('interrupted', flush=True)\n"
        f"ranks = zb.torchrun({str(TARGET)!r}, nproc=2, echo=False).ranks\n"
        f"print('zygote', ranks[0]['ancestors'][{ZYGOTE}], flush=True)\n"
    )
    kernel = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # a process group of its own, as a kernel has
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler),
    )
    for line in kernel.stdout:  # wait until the ranks are up
        if "[zerobook] backend=" in line:
            break
    time.sleep(1)
    (zygote,) = [
        p
        for p in psutil.Process(kernel.pid).children()
        if "zygote_main" in " ".join(p.cmdline())
    ]
    os.killpg(kernel.pid, signal.SIGINT)  # what Jupyter's interrupt sends
    rest = kernel.communicate(timeout=60)[0]
    assert kernel.returncode == 0, rest
    assert "interrupted" in rest and f"zygote {zygote.pid}" in rest
    assert processes_running(str(script)) == []
