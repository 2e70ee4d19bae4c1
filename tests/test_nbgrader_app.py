"""One nbgrader command, forked from the server that imported nbgrader once (Linux, macOS) or
run in a fresh process (Windows): the same output, the same failures, the same timeout, the
command's own folder and environment, nothing left running (zerobook.classroom.nbgrader_app,
zerobook.classroom.nbgrader_fork)."""

import functools
import os
import sqlite3
import subprocess
import sys
import time

import psutil
import pytest

from zerobook.classroom import nbgrader_app
from zerobook.classroom.nbgrader_app import StepFailed, nbgrader

CONFIG = """\
import os, time
print("config read in", os.getcwd(), "for", os.environ["ZEROBOOK_COURSE_ROOT"], flush=True)
if os.environ.get("CONFIG_SLEEPS"):
    time.sleep(120)
if os.environ.get("CONFIG_STARTS"):  # a child holding nbgrader's fds 1 and 2, as a kernel
    import subprocess, sys
    subprocess.run([sys.executable, "-c", os.environ["CONFIG_STARTS"]], check=True)
c = get_config()
c.CourseDirectory.root = os.environ["ZEROBOOK_COURSE_ROOT"]
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")
"""
KERNEL = """\
import os
try:
    os.ftruncate(1, 0)
    os.lseek(1, 0, os.SEEK_SET)
except OSError:  # a pipe: neither
    pass
os.write(1, b"written by the kernel\\n")
"""
WAYS = ["forked", "fresh"]


@pytest.fixture
def course(tmp_path):
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "nbgrader_config.py").write_text(CONFIG)
    (tmp_path / "root").mkdir()
    return tmp_path / "labs", tmp_path / "root"


def way(monkeypatch, name: str) -> None:
    if name == "forked" and not hasattr(os, "fork"):
        pytest.skip("no os.fork here: every command is a fresh process")
    monkeypatch.setattr(nbgrader_app, "FORKED", [name == "forked"])


@pytest.mark.parametrize("name", WAYS)
def test_a_command_runs_in_the_labs_folder_on_its_course_and_prints_the_same(
    course, monkeypatch, name
):
    labs, root = course
    way(monkeypatch, name)
    printed = nbgrader(labs, root, "db", "student", "list")
    assert f"config read in {labs} for {root.resolve()}" in printed, printed
    assert printed.splitlines()[-1] == "There are 0 students in the database:", printed
    # the new gradebook records the migration `alembic heads` names (the server reads it once)
    with sqlite3.connect(root / "gradebook.db") as db:
        (recorded,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    assert recorded == alembic_heads()


@functools.cache
def alembic_heads() -> str:
    """What nbgrader.api.get_alembic_version reads from `alembic heads` (this venv's)."""
    from nbgrader.dbutil import _temp_alembic_ini

    with _temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
        command = [sys.executable, "-m", "alembic", "-c", ini, "heads"]
        output = subprocess.check_output(command, text=True)
    return output.split("\n")[0].split(" ")[0]


@pytest.mark.parametrize("name", WAYS)
def test_a_failing_command_fails_with_its_error(course, monkeypatch, name):
    labs, root = course
    way(monkeypatch, name)
    with pytest.raises(StepFailed, match="^nbgrader autograde exited 1$"):
        nbgrader(labs, root, "autograde", "no_such_lab", "--student", "ada")


@pytest.mark.parametrize("name", WAYS)
def test_a_command_past_its_timeout_is_killed_and_said_so(course, monkeypatch, name):
    labs, root = course
    way(monkeypatch, name)
    monkeypatch.setenv("CONFIG_SLEEPS", "1")
    before = set(psutil.pids())
    started = time.monotonic()
    with pytest.raises(StepFailed, match="took longer than 5 s"):
        nbgrader(labs, root, "db", "student", "list", timeout=5)
    assert time.monotonic() - started < 30
    time.sleep(0.5)
    left = sleeping_since(before)
    assert not left, left


def sleeping_since(before: set) -> list:
    """The command lines of live processes started since `before` (pids) whose environment
    has CONFIG_SLEEPS; a process that ends while it is read is not one (seen in make test)."""
    found = []
    for pid in set(psutil.pids()) - before:
        try:
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                if "CONFIG_SLEEPS" in process.environ():
                    found.append(process.cmdline())
        except psutil.Error:  # gone, or not ours to read, since the listing
            pass
    return found


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork: no server")
def test_the_server_ends_with_its_grader():
    """A grader's server reads its stdin; when the grader is gone it ends."""
    import subprocess
    import sys

    code = (
        "from zerobook.classroom import nbgrader_fork as f; f._server(); "
        "print(f._SERVER[0][0].pid, flush=True)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    pid = int(done.stdout.split()[-1])
    deadline = time.monotonic() + 30
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    else:
        assert not psutil.pid_exists(pid), "the server outlived its grader"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork: no server")
def test_a_server_that_closes_without_forking_fails_the_command(tmp_path, monkeypatch):
    import socket
    import threading

    from zerobook.classroom import nbgrader_fork

    path = str(tmp_path / "socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True).start()
    monkeypatch.setattr(nbgrader_fork, "_server", lambda: path)
    code, printed = nbgrader_fork.command(["--version"], tmp_path, dict(os.environ), 30)
    listener.close()
    assert code == 1 and "did not run the command" in printed


@pytest.mark.parametrize("name", WAYS)
def test_a_kernel_can_add_to_nbgraders_output_but_not_erase_it(
    course, monkeypatch, name
):
    """A process nbgrader starts (a kernel) holds its stdout: a pipe either way, never the
    file the fork's output is copied into (which it could truncate, rewrite or read)."""
    labs, root = course
    way(monkeypatch, name)
    monkeypatch.setenv("CONFIG_STARTS", KERNEL)
    printed = nbgrader(labs, root, "db", "student", "list")
    assert f"config read in {labs}" in printed, printed
    assert "written by the kernel" in printed, printed
