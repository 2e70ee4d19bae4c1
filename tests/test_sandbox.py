"""zerobook.classroom.sandbox (bubblewrap): what a student's code can see, write and leave behind, and the
report guard that keeps a student's file from reporting for the harness."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

PROBE = r"""
import json, os, socket, subprocess
out = {"uid": os.getuid(), "cwd": os.getcwd(), "course_root": os.environ.get("ZEROBOOK_COURSE_ROOT"),
       "secret": os.environ.get("SECRET_TOKEN"),
       "cuda_check": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"), "tmp": sorted(os.listdir("/tmp")),
       "siblings": sorted(os.listdir(os.path.dirname(os.getcwd()))),
       "labs": os.path.exists(os.path.join(os.environ["REPO"], "labs")), "shadow": os.path.exists("/etc/shadow")}
open("written.txt", "w").write("ok")
try:
    open(os.path.join(os.environ["REPO"], "zerobook", "planted.py"), "w")
    out["package_writable"] = True
except OSError:
    out["package_writable"] = False
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2)
    out["network"] = True
except OSError:
    out["network"] = False
subprocess.Popen(["sleep", "300", os.environ["MARK"]], start_new_session=True)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def box():
    from grading_helpers import sandbox_or_not

    if sandbox_or_not():
        pytest.skip("bubblewrap does not work here")
    from zerobook.classroom import sandbox

    return sandbox


def test_a_sandboxed_process_sees_and_keeps_only_its_own_folder(box, tmp_path):
    mark = f"zerobook-sandbox-test-{os.getpid()}"
    (tmp_path.parent / "another-student.txt").write_text("private")
    env = dict(
        os.environ,
        ZEROBOOK_COURSE_ROOT="/course",
        SECRET_TOKEN="s3cret",
        PYTORCH_NVML_BASED_CUDA_CHECK="1",
    )
    argv = box.command(
        [sys.executable, "-c", PROBE],
        writable=[tmp_path],
        env={"REPO": str(ROOT), "MARK": mark},
        environ=env,
    )
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, preexec_fn=box.set_limits
    )
    seen = json.loads(done.stdout)
    assert seen["uid"] == box.UID and seen["cwd"] == str(tmp_path.resolve())
    assert (
        seen["course_root"] is None and seen["secret"] is None
    )  # the instructor's variables stay out
    # torch's own variables go in (zerobook.launcher.command.FORK_SAFE_CUDA_CHECK)
    assert seen["cuda_check"] == "1"
    bound = [
        tmp_path.resolve(),
        *map(Path, box.read_only_roots()),
    ]  # a clone, and its venv, may live in /tmp
    assert seen["tmp"] == sorted(
        {p.parts[2] for p in bound if p.parts[1] == "tmp"}
    )  # only the way to those
    assert seen["siblings"] == [tmp_path.name]  # not another-student.txt beside it
    assert (
        not seen["labs"]
        and not seen["shadow"]
        and not seen["package_writable"]
        and not seen["network"]
    )
    assert (tmp_path / "written.txt").read_text() == "ok"
    assert not (ROOT / "zerobook" / "planted.py").exists()
    time.sleep(0.5)
    import psutil

    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if mark in " ".join(p.info["cmdline"] or [])
    ]


def test_off_means_the_command_itself():
    from zerobook.classroom import sandbox

    os.environ[sandbox.OFF_ENV] = "1"
    try:
        assert sandbox.command(["true"], writable=["/tmp"]) == ["true"]
    finally:
        del os.environ[sandbox.OFF_ENV]


def test_no_sandbox_runs_even_the_references_clean_run_unsandboxed(
    monkeypatch, tmp_path
):
    """grade --no-sandbox times the reference before it grades anyone: that clean run too is
    unsandboxed (it once asked for bwrap first, and on a machine without it every lab failed
    with "the clean run left no result")."""
    from zerobook.classroom import grade, sandbox

    # set through monkeypatch, so that what grade() sets is undone after the test
    monkeypatch.setenv(sandbox.OFF_ENV, "0")
    seen = []

    def lab_limits(labs, root, lab):
        seen.append(os.environ.get(sandbox.OFF_ENV))
        raise SystemExit("measured")

    monkeypatch.setattr(grade, "submitted", lambda root: {"setup_check": ["a"]})
    monkeypatch.setattr(grade, "to_grade", lambda *a: [("setup_check", "a", "d")])
    monkeypatch.setattr(grade, "lab_limits", lab_limits)
    with pytest.raises(SystemExit, match="measured"):
        grade.grade(ROOT / "labs", tmp_path, sandboxed=False)
    assert seen == ["1"]


def harness_globals():
    """A harness module's globals, as runpy gives them: a main() that reports."""
    namespace = {"__name__": "__main__"}
    exec(
        "import zerobook as zb\ndef check():\n    return 1\ndef main(**values):\n    zb.report(checked=check(), **values)\n",
        namespace,
    )
    return namespace


@pytest.fixture
def guarded(tmp_path, monkeypatch):
    from zerobook.trust import report_guard
    from zerobook.launcher import dist

    monkeypatch.setenv(dist.REPORT_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(
        report_guard, "_state", {"codes": None, "globals": None, "written": {}}
    )
    monkeypatch.setattr(
        dist, "_reported", [None]
    )  # another test's report, in this worker
    namespace = harness_globals()
    import zerobook

    report_guard.guard(namespace, owners=(zerobook, dist))
    return namespace, tmp_path


def test_the_guarded_harness_reports_and_its_file_checks_out(guarded):
    from zerobook.trust import report_guard
    from zerobook.launcher import dist

    namespace, folder = guarded
    namespace["main"](total=10)
    report_guard.verify_written(folder, dist.this_rank())
    assert json.loads((folder / f"rank{dist.this_rank()}.json").read_text()) == {
        "checked": 1,
        "total": 10,
    }


def test_a_report_from_the_students_code_is_tampering(guarded):
    import zerobook as zb
    from zerobook.trust.report_guard import TamperError

    with pytest.raises(TamperError, match="called from"):
        zb.report(total=10)  # this test's frame is not the harness's


def test_a_wrapped_report_or_a_patched_harness_is_tampering(guarded, monkeypatch):
    import zerobook as zb
    from zerobook.trust.report_guard import TamperError

    namespace, _ = guarded
    real = zb.report
    with monkeypatch.context() as patch:
        patch.setattr(zb, "report", lambda **values: real(**values))
        with pytest.raises(TamperError, match="zb.report was replaced"):
            namespace["main"](total=10)
    namespace["check"] = lambda: 10  # a harness helper replaced
    with pytest.raises(TamperError, match="replaced the harness's check"):
        namespace["main"](total=10)


def test_a_report_file_written_by_hand_is_tampering(guarded):
    from zerobook.trust import report_guard
    from zerobook.launcher import dist
    from zerobook.trust.report_guard import TamperError

    _, folder = guarded
    (folder / f"rank{dist.this_rank()}.json").write_text(json.dumps({"total": 10}))
    with pytest.raises(TamperError, match="written by something other"):
        report_guard.verify_written(folder, dist.this_rank())


LAYOUT_PROBE = """
import subprocess, sys
from zerobook.classroom import sandbox
inside = "import sys, zerobook; print(sys.prefix, zerobook.__file__)"
argv = sandbox.command([sys.executable, "-c", inside], writable=[sys.argv[1]])
done = subprocess.run(argv, capture_output=True, text=True)
print(done.returncode, done.stdout.strip(), done.stderr.strip()[-500:])
"""


def probe_layout(python, cwd, folder) -> list[str]:
    """LAYOUT_PROBE run by `python` from `cwd`: exit code, sys.prefix and zerobook's
    file as a sandboxed process sees them."""
    done = subprocess.run(
        [str(python), "-c", LAYOUT_PROBE, str(folder)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_a_clone_whose_venv_links_to_a_shared_one_runs_in_the_sandbox(box, tmp_path):
    shared = Path(sys.prefix).resolve()
    clone, student = tmp_path / "clone", tmp_path / "student"  # student: bound
    clone.mkdir()
    student.mkdir()
    (clone / ".venv").symlink_to(shared)  # the instructor's shared environment
    seen = probe_layout(clone / ".venv" / "bin" / "python", clone, student)
    assert seen[:2] == ["0", str(shared)], seen  # the venv's real path: bound and used


def test_an_editable_install_of_another_checkout_is_bound_in_the_sandbox(box, tmp_path):
    import shutil

    import zerobook

    installed = Path(zerobook.__file__).resolve()  # the venv's editable install
    clone, student = tmp_path / "clone", tmp_path / "student"  # grading runs in clone
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(installed.parent, clone / "zerobook", ignore=skip)  # another copy
    student.mkdir()
    seen = probe_layout(sys.executable, clone, student)
    assert seen[0] == "0" and seen[2] == str(installed), seen


def test_a_sandbox_that_cannot_start_says_why_in_the_launch_error(box, tmp_path):
    from zerobook.classroom.sandbox import RankSandbox
    from zerobook.launcher.launch import LaunchError, torchrun

    with pytest.raises(LaunchError) as failed:
        torchrun(
            "zerobook.runs.hello",
            nproc=1,
            timeout=60,
            echo=False,
            sandbox=RankSandbox([tmp_path / "missing"]),
        )
    assert "bwrap: Can't find source path" in str(failed.value), str(failed.value)


def test_a_launch_error_keeps_its_last_line_in_a_one_line_score_reason():
    """The score's reason is one line (first and last); the feedback shows the whole."""
    from zerobook.classroom.clean_score import one_line, run_cell

    message = run_cell("raise RuntimeError('failed; last lines:\\nbwrap: no x')", {})
    assert message == "RuntimeError: failed; last lines:\nbwrap: no x", message
    assert one_line(message) == "RuntimeError: failed; last lines: bwrap: no x"


def test_a_bubblewrap_too_old_for_the_bounds_is_named(tmp_path, monkeypatch):
    from zerobook.classroom import sandbox

    fake = tmp_path / "bwrap"  # bubblewrap 0.6: no --size
    version = '[ "$1" = --version ] && echo "bubblewrap 0.6.2" && exit 0\n'
    refuse = 'echo "bwrap: Unknown option --size" >&2\nexit 1\n'
    fake.write_text("#!/bin/sh\n" + version + refuse)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    sandbox.available.cache_clear()
    try:
        why = sandbox.available()
    finally:
        sandbox.available.cache_clear()
    assert why and "needs bubblewrap >= 0.7" in why and "bubblewrap 0.6.2" in why, why


def test_a_notebook_function_cannot_call_what_the_tests_compare_with(box, tmp_path):
    """Lab 1's tests compare bytes_per_rank with the course's calculator (the setup cell's
    `memory`); the function server ran the setup cell beside the student's, so a function that
    returned `memory.model_state_bytes(...)` scored 2/2. The student's cells now run on their
    own under the lab's rules: the name is not there, and importing it is refused."""
    from zerobook.classroom.function_server import FunctionServer

    def call(code: str):
        server = FunctionServer(code, tmp_path, "memory")
        try:
            return server.call("bytes_per_rank", [8.0, 1, 8], {})
        finally:
            server.close()

    calls = "def bytes_per_rank(psi, stage, n):\n    return memory.model_state_bytes(psi, stage, n)\n"
    with pytest.raises(NameError, match="'memory' is not defined"):
        call(calls)
    with pytest.raises(RuntimeError, match="zerobook.accounting is not a module"):
        call("from zerobook.accounting import memory\n" + calls)
    own = "def bytes_per_rank(psi, stage, n):\n    return {'total': psi * 16 / n}\n"
    assert call(own) == {"total": 16.0}
