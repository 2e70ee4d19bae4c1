"""zerobook.classroom.limits: one submission's sandboxes, bounded together. Each hostile program
runs in a sandbox of a grading job whose bounds are set low here (tens of processes,
160 MiB), passes one of them slightly, is killed with its reason, and leaves no process
behind: with a job uid (a root grader) and in a user namespace (any other user)."""

import functools
import os
import subprocess
import sys
import time

import psutil
import pytest

from zerobook.classroom.watchdog import Watchdog

BOUNDS = {
    "tasks": 48,
    "memory_mb": 160,
    "cpu_s": 60,
    "disk_mb": 32,
    "disk_files": 200,
    "files": 96,
}

FORK_LOOP = """
import os, time
try:
    for _ in range(10_000):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
except OSError:  # refused (RLIMIT_NPROC): hold what it has
    time.sleep(60)
"""
MEMORY_HOG = """
import time
chunks = []
for _ in range(40):  # 40 x 8 MiB, each page touched
    chunks.append(bytearray(b"x" * (8 << 20)))
    time.sleep(0.02)
time.sleep(60)
"""
DISK_FILLER = """
import time
chunk = b"x" * (4 << 20)
for i in range(24):  # 96 MiB into the student's folder, 4 MiB at a time
    with open(f"fill{i}.bin", "wb") as f:
        f.write(chunk)
    time.sleep(0.02)
time.sleep(60)
"""
MANY_FILES = """
import time
for i in range(400):  # empty: no bytes, only files
    open(f"empty{i}", "w").close()
time.sleep(60)
"""
BUSY = """
while True:
    pass
"""
FD_LEAK = """
import time
held = []
try:
    while True:
        held.append(open("/dev/null"))
except OSError:
    pass
time.sleep(60)
"""
TMP_FILLER = """
try:
    with open("/tmp/fill.bin", "wb") as f:
        for _ in range(24):
            f.write(b"x" * (4 << 20))
            f.flush()
    print("wrote 96 MiB")
except OSError as exc:
    print("refused:", exc.strerror)
"""


@pytest.fixture(scope="module")
def box():
    from grading_helpers import sandbox_or_not

    if sandbox_or_not():
        pytest.skip("bubblewrap does not work here")
    from zerobook.classroom import sandbox

    return sandbox


@functools.cache
def job_envs(mode: str) -> tuple:
    """One job's environment per mode for this test process: a claimed uid (claimed
    once), or none (the caller's user namespace, as for a grader that is not root)."""
    from zerobook.classroom import limits

    bounds = limits.Bounds(**BOUNDS)
    if mode == "job uid":
        return tuple(limits.job_env(0, bounds).items())
    return ((limits.JOB_ENV, f"{os.getpid()}-userns"), *bounds.env().items())


@pytest.fixture(params=["job uid", "user namespace"])
def job(request, monkeypatch):
    """A grading job's environment, in this process (as zerobook.classroom gives its
    subprocesses): with a uid of its own (root), or in the caller's user namespace."""
    from zerobook.classroom import limits

    if request.param == "job uid" and os.geteuid() != 0:
        pytest.skip("a job uid needs a root grader")
    env = dict(job_envs(request.param))
    monkeypatch.delenv(limits.UID_ENV, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def run_watched(box, job, program: str, folder) -> tuple:
    """`program` in a sandbox of `job`, watched: (reason, seconds, process, output)."""
    from zerobook.classroom import limits

    argv = box.command([sys.executable, "-c", program], writable=[folder])
    start = time.monotonic()
    with Watchdog(job, limits.Bounds(**BOUNDS)) as watchdog:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=box.set_limits,  # noqa: PLW1509 - as zerobook.launcher.launch starts it
            start_new_session=True,
        )
        try:
            proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    output = proc.stdout.read().decode(errors="replace")
    proc.stdout.close()
    return watchdog.reason, time.monotonic() - start, proc, output


def survivors(job) -> list:
    """Processes of the job left running: its uid's, or under its sandboxes."""
    from zerobook.classroom import limits

    watchdog = Watchdog(job, limits.Bounds(**BOUNDS))
    return [
        p.pid
        for p in watchdog.members()[0]
        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    ]


@pytest.mark.parametrize(
    "program, reason",
    [
        (FORK_LOOP, "processes and threads at once (the bound is 48)"),
        (MEMORY_HOG, "MiB of memory together (the bound is 160 MiB)"),
        (DISK_FILLER, "MiB into its folders (the bound is 32 MiB)"),
        (MANY_FILES, "files in its folders (the bound is 200)"),
        (FD_LEAK, "files open (the bound is 96)"),
    ],
    ids=["fork loop", "memory hog", "disk filler", "many files", "fd leak"],
)
def test_a_submission_past_a_bound_is_killed_with_its_reason(
    box, job, tmp_path, program, reason
):
    found, seconds, proc, output = run_watched(box, job, program, tmp_path)
    assert found and reason in found, (found, output[-2000:])
    assert proc.returncode != 0 and seconds < 30, (
        proc.returncode,
        seconds,
        output[-2000:],
    )
    time.sleep(0.3)
    assert not survivors(job)


def test_the_sandboxs_tmp_is_a_tmpfs_of_the_disk_bound(box, job, tmp_path):
    found, _, _, output = run_watched(box, job, TMP_FILLER, tmp_path)
    assert "refused: No space left on device" in output and found is None, (
        found,
        output,
    )


def test_a_submission_within_its_bounds_runs_untouched(box, job, tmp_path):
    found, _, proc, output = run_watched(
        box, job, "import zerobook; print('fine')", tmp_path
    )
    assert found is None and proc.returncode == 0 and "fine" in output, (found, output)


def test_a_job_uid_reads_what_a_launch_needs_and_nothing_more(box, job, tmp_path):
    """torchrun's rendezvous resolves localhost (/etc/hosts, which bwrap's /etc must let
    the job uid read), the student's folder is the job's to write, and the student has
    no capability and cannot gain one (no setuid program works)."""
    program = (
        "import socket, os; socket.getaddrinfo('localhost', 29500);"
        "open('mine.txt', 'w').write('ok');"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status'));"
        "print(os.getuid(), status['CapEff'].strip(), status['NoNewPrivs'].strip())"
    )
    found, _, proc, output = run_watched(box, job, program, tmp_path)
    expected = [job.get("ZEROBOOK_SANDBOX_UID", "1000"), "0" * 16, "1"]
    assert proc.returncode == 0 and output.split() == expected, (found, output)


def test_a_process_past_its_cpu_time_is_stopped_by_the_kernel(
    box, job, tmp_path, monkeypatch
):
    monkeypatch.setenv("ZEROBOOK_LIMIT_CPU_S", "1")
    _, seconds, proc, output = run_watched(box, job, BUSY, tmp_path)
    assert proc.returncode != 0 and seconds < 30, (proc.returncode, seconds, output)


def test_two_graders_never_share_a_job_uid():
    """RLIMIT_NPROC counts a uid's tasks and the watchdog kills a uid's processes: two
    grading processes on one machine (two courses, two test workers) must hold two."""
    from zerobook.classroom import limits

    if os.geteuid() != 0:
        pytest.skip("job uids are a root grader's")
    mine = dict(job_envs("job uid"))[limits.UID_ENV]
    claim = "from zerobook.classroom import limits; print(limits.claim_uid())"
    other = subprocess.run(
        [sys.executable, "-c", claim], capture_output=True, text=True
    )
    assert other.returncode == 0, other.stderr[-2000:]
    assert other.stdout.strip() != mine and int(other.stdout) in limits.JOB_UIDS


def test_the_process_table_reads_as_psutil_reads_it_where_there_is_no_proc():
    """The watchdog reads /proc/PID/status (Linux); elsewhere psutil: the same parent, uid
    and name for this process, its parent and a child."""
    from zerobook.classroom import watchdog

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        mine = {os.getpid(), os.getppid(), child.pid}
        fast = watchdog._status_table() if os.path.isdir("/proc") else None
        slow = watchdog._psutil_table()
        assert mine <= set(slow)
        assert slow[child.pid][1:] == (os.getpid(), os.getuid())
        if fast is not None:
            assert {p: fast[p] for p in mine} == {p: slow[p] for p in mine}
    finally:
        child.kill()
        child.wait()


def test_a_process_named_bwrap_inside_a_sandbox_is_no_root_of_the_job(monkeypatch):
    """Its environment holds the job's marker (inherited) and its name is the student's to
    choose: it is watched as a member, never as a sandbox whose folders the disk bound walks."""
    from zerobook.classroom import limits, watchdog

    table = {  # pid -> (name, parent, uid): a sandbox, the student's python, a fake bwrap
        100: ("bwrap", 1, 0),
        101: ("python", 100, 0),
        102: ("bwrap", 101, 0),
        103: ("bwrap", 1, 0),  # another job's sandbox
    }
    marker = {limits.JOB_ENV: "job-1"}
    monkeypatch.setattr(watchdog, "_status_table", lambda: table)
    monkeypatch.setattr(
        watchdog, "_environ", lambda pid: marker if pid in (100, 101, 102) else {}
    )
    monkeypatch.setattr(watchdog, "_processes", sorted)
    members, roots = Watchdog(marker, limits.Bounds(**BOUNDS)).members()
    assert roots == [100] and members == [100, 101, 102]


@pytest.mark.parametrize(
    "cores, free_gib, jobs",
    [(16, 128, 8), (16, 48, 8), (16, 12, 2), (2, 64, 1), (1, 64, 1), (8, 4, 1)],
)
def test_grade_without_jobs_grades_one_per_two_cores_as_memory_allows(
    monkeypatch, cores, free_gib, jobs
):
    """`grade` without --jobs: one submission per two cores, no more than the free memory
    holds at the memory bound (6 GiB each), at least one; the words say both."""
    import os
    import types

    import psutil

    from zerobook.classroom import limits

    monkeypatch.setattr(
        os, "sched_getaffinity", lambda _: set(range(cores)), raising=False
    )
    free = types.SimpleNamespace(available=free_gib * 2**30)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: free)
    found, why = limits.auto_jobs(limits.Bounds())
    assert found == jobs and f"{cores} cores" in why and "6,144 MiB each" in why
