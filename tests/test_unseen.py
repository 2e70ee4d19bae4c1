"""The course's implementation of what a lab grades is hidden from a graded submission
(zerobook.classroom.unseen): each harness's UNSEEN modules are ones its lab's rules refuse
(zerobook.trust.policy) and the harness never imports itself, and inside a grading sandbox their
files hold only a stub that refuses to be imported."""

import ast
import re
import subprocess
import sys

import pytest

from zerobook.classroom import unseen

LABS = [
    "bug_zoo",
    "capstone",
    "ddp",
    "ring_allreduce",
    "zero",
    "zero3",
    "zeropp",
]  # those that hide any
# torch imported once; each harness then imported in a fork of its own
PROBE = """
import json, os, sys, torch
for lab in sys.argv[1:]:
    read, write = os.pipe()
    if os.fork() == 0:
        harness = __import__(f"zerobook.labs.{lab}", fromlist=["x"])
        found = sorted(m for m in sys.modules if m.startswith("zerobook"))
        os.write(write, json.dumps(found).encode())
        os._exit(0)
    os.close(write)
    print(lab, os.read(read, 1 << 20).decode(), flush=True)
    os.wait()
"""


@pytest.fixture(scope="module")
def harness_imports() -> dict:
    """lab -> the zerobook modules importing its harness imports."""
    import json

    done = subprocess.run(
        [sys.executable, "-c", PROBE, *LABS], capture_output=True, text=True, check=True
    )
    return {
        line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1])
        for line in done.stdout.splitlines()
    }


@pytest.mark.parametrize("lab", LABS)
def test_what_a_harness_hides_its_rules_refuse_and_it_never_imports(
    harness_imports, lab
):
    from zerobook.trust import policy

    hidden = unseen.names(lab)
    assert hidden and not any(policy.allows(lab, module) for module in hidden)
    imported = harness_imports[lab]
    assert not {m for m in imported for h in hidden if m == h or m.startswith(h + ".")}


def test_the_other_labs_hide_nothing():
    assert [unseen.names(lab) for lab in ("fsdp2", "memory", "setup_check")] == [()] * 3


def test_the_graded_labs_hide_the_course_implementations_they_grade():
    assert [p.name for p in unseen.files("ddp")] == ["ddp.py", "bucket_events.py"]
    assert "zero" in [p.name for p in unseen.files("zero3")]  # the whole package
    assert [p.name for p in unseen.files("ring_allreduce")] == ["collectives.py"]


def test_only_the_course_modules_can_be_hidden():
    with pytest.raises(ValueError, match="only the course's own modules"):
        unseen.path_of("torch.distributed.fsdp")


@pytest.fixture
def sandbox():
    from grading_helpers import sandbox_or_not

    if sandbox_or_not():
        pytest.skip("bubblewrap does not work here")
    from zerobook.classroom import sandbox

    return sandbox


def test_inside_a_graded_sandbox_the_hidden_files_are_stubs(sandbox, tmp_path):
    """Read by path, exec'd, or imported under its own name or another: never the course's code."""
    stub = unseen.write_stub(tmp_path)
    hidden = unseen.files("capstone")
    probe = """
import importlib.util, pathlib, zerobook
root = pathlib.Path(zerobook.__file__).parent
print((root / "data_parallel" / "ddp.py").read_text().splitlines()[0])
for how in ("import zerobook.data_parallel.ddp", "import zerobook.zero.stage3", "from zerobook.zero import Zero3"):
    try:
        exec(how)
        print(how, "WORKED")
    except ImportError as exc:
        print(how, "refused:", exc)
spec = importlib.util.spec_from_file_location("mine", root / "data_parallel" / "ddp.py")
try:
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    print("by path WORKED")
except ImportError as exc:
    print("by path refused")
print(sorted(str(p.relative_to(root / "zero")) for p in (root / "zero").rglob("*")))
print((root / "labs" / "zero3_record.py").exists(), (root / "train" / "models.py").read_text()[:3])
"""
    argv = sandbox.command(
        [sys.executable, "-c", probe],
        writable=[str(tmp_path)],
        hidden=hidden,
        stub=stub,
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr[-2000:]
    assert lines[0].startswith("raise ImportError")  # the stub, not the course's DDP
    assert all(
        "refused: zerobook." in line and "hidden while this lab is graded" in line
        for line in lines[1:4]
    )
    assert lines[4] == "by path refused"
    # the package's folder: the stub alone (and, where Python keeps bytecode, the stub's own
    # compiled copy, written in the sandbox's empty folder as the probe imported it)
    kept = [n for n in ast.literal_eval(lines[5]) if n != "__pycache__"]
    assert kept[0] == "__init__.py" and all(
        re.fullmatch(r"__pycache__/__init__\.[\w-]+\.pyc", n) for n in kept[1:]
    ), kept
    assert lines[6] == 'True """'  # what the lab does not hide stays readable


def test_another_checkout_and_the_compiled_copies_are_hidden_too(tmp_path):
    """An editable install may point at another checkout than the grader's (the sandbox binds
    both), and a module's compiled copy in __pycache__ runs as well as its source."""
    other = tmp_path / "checkout" / "zerobook"
    room = other / "data_parallel"
    (room / "__pycache__").mkdir(parents=True)
    (room / "collectives.py").write_text("def ring_all_reduce(t): ...\n")
    (room / "__pycache__" / "collectives.cpython-311.pyc").write_bytes(b"compiled")
    (tmp_path / "grader").mkdir()
    stub = unseen.write_stub(tmp_path / "grader")
    args = unseen.binds(unseen.files("ring_allreduce"), stub, [other])
    pairs = list(zip(args, args[1:], args[2:]))
    assert ("--ro-bind", str(stub), str(room / "collectives.py")) in pairs
    assert (
        "--ro-bind",
        str(stub.parent / "empty"),
        str(room / "__pycache__"),
    ) in pairs
    path = unseen.PACKAGE / "data_parallel" / "collectives.py"
    assert ("--ro-bind", str(stub), str(path)) in pairs
