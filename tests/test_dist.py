"""The rank side without torchrun: backend choice, timeouts, and world size 1."""

from datetime import timedelta

import pytest
import torch

from conftest import ROOT
from zerobook.launcher import dist as zdist


def test_gloo_on_cpu_and_nccl_only_with_a_gpu_per_rank(monkeypatch):
    monkeypatch.delenv(zdist.BACKEND_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert zdist.choose_backend(2)[0] == "nccl"
    backend, why = zdist.choose_backend(4)  # two GPUs cannot serve four ranks
    assert backend == "gloo" and "2 GPU(s) for 4 local rank(s)" in why
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert zdist.choose_backend(1)[0] == "gloo"


def test_the_backend_can_be_forced(monkeypatch):
    monkeypatch.setenv(zdist.BACKEND_ENV, "gloo")
    assert zdist.choose_backend(1) == ("gloo", "ZEROBOOK_BACKEND=gloo")


def test_collectives_never_wait_torchs_thirty_minutes(monkeypatch):
    monkeypatch.delenv(zdist.TIMEOUT_ENV, raising=False)
    assert zdist.collective_timeout() == timedelta(
        seconds=zdist.DEFAULT_COLLECTIVE_TIMEOUT_S
    )
    assert zdist.collective_timeout() < torch.distributed.constants.default_pg_timeout
    monkeypatch.setenv(zdist.TIMEOUT_ENV, "7.5")
    assert zdist.collective_timeout() == timedelta(seconds=7.5)


def test_world_size_1_in_process(monkeypatch):
    for name in (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        zdist.BACKEND_ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    me = zdist.setup(verbose=False)
    try:
        assert (me.rank, me.world_size, me.backend, me.device) == (0, 1, "gloo", "cpu")
        t = torch.arange(3.0)
        torch.distributed.all_reduce(t)
        assert t.tolist() == [0.0, 1.0, 2.0]
        assert zdist.setup(verbose=False) == me  # safe to call twice
    finally:
        zdist.teardown()
    assert not torch.distributed.is_initialized()


def test_report_prints_when_no_notebook_listens(monkeypatch, capsys):
    monkeypatch.delenv(zdist.REPORT_DIR_ENV, raising=False)
    zdist.report(loss=0.5)
    assert capsys.readouterr().out == '[report] {"loss": 0.5}\n'


@pytest.mark.parametrize("bad", [object(), {1, 2}])
def test_report_names_what_json_cannot_hold(bad):
    with pytest.raises(TypeError, match="zb.report: cannot send"):
        zdist.report(value=bad)


def test_the_device_follows_the_backend_and_sharing_a_gpu_needs_one(monkeypatch):
    """NCCL: the rank's own GPU; gloo: CPU; ZEROBOOK_DEVICE=cuda shares GPUs round-robin, and
    without CUDA it has nothing to share, so the rank stays on the CPU."""
    import torch

    from zerobook.launcher.dist import DEVICE_ENV, choose_device

    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert choose_device("nccl", 3) == "cuda:3" and choose_device("gloo", 3) == "cpu"
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert choose_device("gloo", 3) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert choose_device("gloo", 3) == "cuda:1" and choose_device("nccl", 2) == "cuda:0"


def test_a_run_on_shared_gpus_says_what_does_not_work_there(monkeypatch):
    """ZEROBOOK_DEVICE=cuda is an opt-in with known failures (the H200 record): said once, when
    a run starts; where there is no GPU, that it was ignored."""
    from zerobook.launcher.dist import DEVICE_ENV, device_note

    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert device_note("gloo", "cuda:0") == device_note("gloo", "cpu") == ""
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    assert device_note("gloo", "cpu") == "; ZEROBOOK_DEVICE=cuda ignored: no GPU here"
    note = device_note("gloo", "cuda:1")
    assert "send/recv, FSDP2 and sharded checkpoints crash" in note
    assert (ROOT / note.split("(")[1].rstrip(")")).is_file()  # the record it cites
    assert device_note("nccl", "cuda:1") == ""
