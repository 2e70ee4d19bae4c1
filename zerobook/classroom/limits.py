"""What one submission may use while it is graded, all its processes together: processes
and threads, memory, CPU time, disk and open files. zerobook.classroom bounds each
submission (a uid and a watchdog, zerobook.classroom.watchdog, per concurrent job),
zerobook.classroom.sandbox each process.

    ZEROBOOK_LIMIT_TASKS=512 ZEROBOOK_LIMIT_MEMORY_MB=6144 make grade  # the defaults

Each bound, and what enforces it (`mechanism()` says which is in force on this machine):
- processes and threads: RLIMIT_NPROC. It counts the tasks of a real uid and never
  applies to root, so a root grader gives each concurrent job a uid of its own
  (claim_uid: one of JOB_UIDS that no user has and no other grader holds; the sandbox
  switches to it); under another user, RLIMIT_NPROC set inside the sandbox's user
  namespace counts only that sandbox's tasks. The watchdog counts
  them too.
- memory: the watchdog's sum of the resident memory of the submission's processes,
  shared pages counted once (RLIMIT_AS bounds address space, which torch's arenas reach
  long before real use; a plain sum of RSS counts a fork's pages once per child).
- CPU time: RLIMIT_CPU per process (a launch's and a cell's time limits bound the rest).
- disk: the sandbox's /tmp and /dev/shm are tmpfs of this size; the watchdog adds up the
  bytes and files in the folders the sandboxes may write (RLIMIT_FSIZE caps one file).
- open files: RLIMIT_NOFILE per process, and the watchdog's bound on any one's count.
The kernel's limits sit SLACK past the watchdog's: a loop that runs into them is seen.
When a bound is passed the watchdog kills every process of the submission (SIGKILL: none
waits for its children) and keeps the reason: that student's failure. cgroup v2
(memory.max, pids.max) would bound the same in the kernel; zerobook does not use it yet,
and `cgroup_v2_unusable` says why it could not here.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields

ENV_PREFIX = "ZEROBOOK_LIMIT_"  # then a Bounds field in capitals: TASKS, DISK_MB, ...
JOB_ENV = "ZEROBOOK_SANDBOX_JOB"  # in a sandbox's bwrap environment: whose it is
UID_ENV = "ZEROBOOK_SANDBOX_UID"  # the uid a root grader's sandboxes run as
JOB_UIDS = range(61000, 61064)  # no user has them; one per concurrent job
UID_LOCKS = "/run/zerobook-job-uids"  # a grader holds a lock here for each uid it uses
MiB = 2**20
SLACK = 32  # the kernel's limits past the watchdog's (tasks, open files)


@dataclass(frozen=True)
class Bounds:
    """One submission's bounds (sizes in MiB)."""

    tasks: int = 512  # processes and threads (Lab 0 graded: 25 at most)
    memory_mb: int = 6144  # summed resident memory (Lab 0 graded: 1.1 GiB at most)
    cpu_s: int = 1800  # per process
    disk_mb: int = 1024  # the writable folders together; /tmp and /dev/shm each
    disk_files: int = 20000  # files and folders in the writable folders together
    files: int = 1024  # open files of one process (Lab 0 graded: 62 at most)

    @classmethod
    def from_env(cls, environ=None) -> Bounds:
        """The defaults, or ZEROBOOK_LIMIT_<NAME> of `environ` (this process's)."""
        environ = os.environ if environ is None else environ
        given = {f.name: environ.get(ENV_PREFIX + f.name.upper()) for f in fields(cls)}
        return cls(**{k: int(v) for k, v in given.items() if v})

    def env(self) -> dict[str, str]:
        return {ENV_PREFIX + k.upper(): str(v) for k, v in asdict(self).items()}


def auto_jobs(bounds: Bounds) -> tuple[int, str]:
    """How many submissions `grade` grades at once when --jobs is not given, and why in words:
    one per two cores (a lab launches 2 to 4 ranks), no more than the free memory holds at
    each submission's memory bound."""
    import psutil

    affinity = getattr(os, "sched_getaffinity", None)  # Linux; macOS has none
    cores = len(affinity(0)) if affinity else os.cpu_count() or 1
    free_mb = psutil.virtual_memory().available // 2**20
    jobs = max(1, min(cores // 2, free_mb // bounds.memory_mb))
    why = (
        f"{cores} cores and {free_mb:,} MiB free: one per 2 cores, "
        f"{bounds.memory_mb:,} MiB each"
    )
    return jobs, why


def job_env(slot: int, bounds: Bounds) -> dict[str, str]:
    """The environment of grading job `slot`'s subprocesses: its marker, its bounds, and
    (a root grader) a uid of its own (claim_uid)."""
    env = {JOB_ENV: f"{os.getpid()}-{slot}", **bounds.env()}
    if os.geteuid() == 0:
        env[UID_ENV] = str(claim_uid())
    return env


_claimed: dict[int, int] = {}  # uid -> its lock's file descriptor, held while we live


def uid_lock(uid: int) -> str:
    """The lock file a grader holds while job uid `uid` is its."""
    folder = UID_LOCKS if os.access(os.path.dirname(UID_LOCKS), os.W_OK) else "/tmp"
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"zerobook-job-uid-{uid}")


def uid_held(uid: int) -> bool:
    """Whether a live grading process holds job uid `uid` now."""
    import fcntl

    fd = os.open(uid_lock(uid), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False  # closing the file below lets it go again
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def claim_uid() -> int:
    """A uid of JOB_UIDS that no user of this machine has and no other grading process
    holds (a lock file each, held until this process exits); any process still running
    as it (left by a grader that died) is killed first."""
    import fcntl
    import pwd

    for uid in JOB_UIDS:
        if uid in _claimed or uid in {u.pw_uid for u in pwd.getpwall()}:
            continue
        fd = os.open(uid_lock(uid), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _claimed[uid] = fd
        kill_uid(uid)
        return uid
    raise RuntimeError(
        f"all {len(JOB_UIDS)} job uids are held by other grading processes"
    )


def job_uid() -> int | None:
    """The uid this process's sandboxes run as, if root grading gave one."""
    uid = os.environ.get(UID_ENV)
    return int(uid) if uid and os.geteuid() == 0 else None


def mechanism() -> str:
    """What enforces each bound here, in one line (for the grade output)."""
    why = cgroup_v2_unusable() or "zerobook does not use it yet"
    tasks = (
        "RLIMIT_NPROC of a uid per job"
        if os.geteuid() == 0
        else "RLIMIT_NPROC in each sandbox's user namespace"
    )
    return (
        f"bounds: tasks by {tasks} and the watchdog; memory by the watchdog "
        "(summed RSS); disk by tmpfs sizes and the watchdog; CPU time and open files "
        f"by rlimits per process (cgroup v2 not used: {why})"
    )


def cgroup_v2_unusable() -> str | None:
    """None if this process may make cgroup v2 groups with memory and pids controllers
    (a delegated or writable cgroup), else why not."""
    lines = _read("/proc/self/cgroup").splitlines()
    ours = next((line[3:].strip() for line in lines if line.startswith("0::")), None)
    for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if ours is not None and os.path.exists(f"{mount}/cgroup.controllers"):
            here = os.path.join(mount, ours.lstrip("/"))
            enabled = _read(f"{here}/cgroup.subtree_control").split()
            if {"memory", "pids"} <= set(enabled) and os.access(here, os.W_OK):
                return None
            return (
                f"{here} delegates no memory and pids controllers "
                f"(enabled: {' '.join(enabled) or 'none'})"
            )
    return "no cgroup v2 hierarchy"


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def kill_uid(uid: int) -> None:
    """SIGKILL every process of `uid`: kill(-1) sent as that uid reaches exactly its
    processes, those forked meanwhile included (the kill command is one of them)."""
    import subprocess

    subprocess.run(
        ["kill", "-KILL", "-1"],
        check=False,
        user=uid,
        group=uid,
        extra_groups=[],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
