"""The lab harnesses' guards, in this process (no ranks): a forbidden module cannot be imported
and is recognised when loaded some other way; a replaced function of the record is named; tests
that share a run launch it once."""

import importlib
import importlib.util
import sys
import types

import pytest

import zerobook
from zerobook.labs.harness import Forbidden, borrowed, forbid, replaced, trusted


@pytest.fixture
def ddp_forbidden(monkeypatch):
    """forbid(("zerobook.data_parallel.ddp",)) for one test; the import system as it was afterwards."""
    saved = importlib.import_module("zerobook.data_parallel.ddp")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setitem(sys.modules, "zerobook.data_parallel.ddp", saved)
    monkeypatch.setitem(sys.modules, "zerobook.ddp", saved)  # its old name, loaded
    monkeypatch.setattr(zerobook, "ddp", saved, raising=False)
    return forbid(("zerobook.data_parallel.ddp",))


def test_a_forbidden_module_cannot_be_imported_by_any_spelling(ddp_forbidden):
    for how in (
        lambda: importlib.import_module("zerobook.data_parallel.ddp"),
        lambda: zerobook.data_parallel.ddp,
        lambda: exec("from zerobook.data_parallel.ddp import OverlappedAllReduce", {}),
        # its old name (zerobook/_moved.py), loaded and an attribute before forbid()
        lambda: importlib.import_module("zerobook.ddp"),
        lambda: zerobook.ddp,
        lambda: exec("from zerobook import ddp", {}),
    ):
        with pytest.raises(
            ImportError, match="the course's own implementation of what this lab grades"
        ):
            how()


def test_a_forbidden_module_loaded_from_its_file_is_recognised(ddp_forbidden):
    spec = importlib.util.spec_from_file_location(
        "my_ddp", ddp_forbidden["zerobook.data_parallel.ddp"]
    )
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)  # not registered in sys.modules
    student = types.ModuleType("student")
    assert borrowed(student, ddp_forbidden) == []
    exec(
        "class BucketedDDP(Base):\n    pass\n",
        {"Base": copy.OverlappedAllReduce},
        vars(student),
    )
    assert borrowed(student, ddp_forbidden) == [
        "my_ddp"
    ]  # a subclass: its base's methods
    held = types.ModuleType("student")
    held.helper = copy
    assert borrowed(held, ddp_forbidden) == ["my_ddp"]  # the module itself, held


def test_a_replaced_function_of_the_record_is_named(monkeypatch):
    import torch

    from zerobook.data_parallel.inflight import Handle, InFlight

    snapshot = trusted(InFlight, Handle, equal=torch)
    assert replaced(snapshot) == []
    monkeypatch.setattr(Handle, "wait", lambda self, timeout=None: True)
    monkeypatch.setattr(torch, "equal", lambda a, b: True)
    assert replaced(snapshot) == ["Handle.wait", "torch.equal"]


def test_tests_that_share_a_run_launch_it_once_until_its_file_is_written_again(
    tmp_path, monkeypatch
):
    """grading.run_shared: one launch (or one failure) for every test that reads it; running the
    cell that writes the student's file again launches again."""
    import os

    from zerobook import grading

    launches = []

    def launch(lab, student_file, part, nproc=4, **options):
        launches.append(part)
        raise RuntimeError("the student's code raised")

    monkeypatch.setattr(grading, "run_part", launch)
    student = tmp_path / "ddp_student.py"
    student.write_text("x = 1\n")
    for _ in range(3):
        with pytest.raises(RuntimeError, match="the student's code raised"):
            grading.run_shared("ddp", str(student), "train", nproc=3)
    assert launches == ["train"]
    student.write_text("x = 1\n")
    os.utime(
        student, ns=(0, student.stat().st_mtime_ns + 1)
    )  # however coarse the clock
    with pytest.raises(RuntimeError):
        grading.run_shared("ddp", str(student), "train", nproc=3)
    assert launches == ["train", "train"]


def test_a_forbidden_library_module_is_not_called_the_courses_own():
    """Labs 4-5 refuse torch's FSDP and DTensor too: the refusal says whose it is."""
    hook = Forbidden(("torch.distributed.fsdp",))
    with pytest.raises(ImportError, match="is a library's implementation of what"):
        hook.find_spec("torch.distributed.fsdp._fully_shard")
    assert hook.find_spec("torch.distributed.tensor") is None
