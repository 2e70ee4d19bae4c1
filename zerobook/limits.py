"""What one submission may use while it is graded, all its processes together: processes
and threads, memory, CPU time, disk and open files. zerobook.classroom bounds each
submission (a uid and a watchdog per concurrent job), zerobook.sandbox each process.

    ZEROBOOK_LIMIT_TASKS=512 ZEROBOOK_LIMIT_MEMORY_MB=6144 make grade  # the defaults

Each bound, and what enforces it (`mechanism()` says which is in force on this machine):
- processes and threads: RLIMIT_NPROC. It counts the tasks of a real uid and never
  applies to root, so a root grader gives each concurrent job a uid of its own
  (JOB_UIDS, which the sandbox switches to); under another user, RLIMIT_NPROC set inside
  the sandbox's user namespace counts only that sandbox's tasks. The watchdog counts
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
import signal
import threading
from dataclasses import asdict, dataclass, fields

import psutil

ENV_PREFIX = "ZEROBOOK_LIMIT_"  # then a Bounds field in capitals: TASKS, DISK_MB, ...
JOB_ENV = "ZEROBOOK_SANDBOX_JOB"  # in a sandbox's bwrap environment: whose it is
UID_ENV = "ZEROBOOK_SANDBOX_UID"  # the uid a root grader's sandboxes run as
JOB_UIDS = range(61000, 61064)  # no user has them; one per concurrent job
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


def job_env(slot: int, bounds: Bounds) -> dict[str, str]:
    """The environment of grading job `slot`'s subprocesses: its marker, its bounds, and
    (a root grader) its uid."""
    env = {JOB_ENV: f"{os.getpid()}-{slot}", **bounds.env()}
    if os.geteuid() == 0:
        env[UID_ENV] = str(JOB_UIDS[slot % len(JOB_UIDS)])
    return env


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


class Watchdog:
    """Watches the sandboxes of one grading job (bwrap processes whose environment holds
    `job_env`'s marker, everything under them, and every process of the job's uid) every
    `every` s; when a bound is passed, kills them all, and keeps killing any the job
    starts afterwards (its next launches fail at once). `reason`: why, or None."""

    def __init__(self, env: dict[str, str], bounds: Bounds, every: float = 0.1):
        self.marker, self.bounds, self.every = env[JOB_ENV], bounds, every
        self.uid = int(env[UID_ENV]) if UID_ENV in env else None
        self.reason: str | None = None
        self.peak = dict.fromkeys(REASONS, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.kill()  # whatever a submission left behind (its sandboxes have ended)

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            try:
                members, roots = self.members()
                if self.reason is None:
                    self.reason = self.check(members, roots)
                if self.reason is not None and members:
                    self.kill(members)
            except Exception:  # noqa: BLE001, S112 - a process gone: next round
                continue

    def members(self) -> tuple[list[psutil.Process], list[psutil.Process]]:
        """Every process of the job's sandboxes, and the sandboxes' bwrap processes."""
        roots, found = [], {}
        for p in psutil.process_iter(["name", "uids"]):
            if (
                self.uid is not None
                and p.info["uids"]
                and p.info["uids"].real == self.uid
            ):
                found[p.pid] = p
            if p.info["name"] == "bwrap" and _environ(p).get(JOB_ENV) == self.marker:
                roots.append(p)
        for root in roots:
            found[root.pid] = root
            for child in _children(root):
                found[child.pid] = child
        return list(found.values()), roots

    def check(self, members, roots) -> str | None:
        """Why the job's processes are over a bound now, or None."""
        now = measure(members, roots, self.bounds)
        self.peak = {k: max(v, now[k]) for k, v in self.peak.items()}
        over = [k for k, bound in asdict(self.bounds).items() if now.get(k, 0) > bound]
        return (
            REASONS[over[0]].format(now[over[0]], getattr(self.bounds, over[0]))
            if over
            else None
        )

    def kill(self, members=None) -> None:
        """SIGKILL every process of the job (and of its uid: kill_uid)."""
        members = self.members()[0] if members is None else members
        for p in members:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
        if self.uid is not None:
            kill_uid(self.uid)


REASONS = {
    "tasks": "it ran {} processes and threads at once (the bound is {})",
    "memory_mb": "its processes used {} MiB of memory together (the bound is {} MiB)",
    "disk_mb": "it wrote {} MiB into its folders (the bound is {} MiB)",
    "disk_files": "it made {} files in its folders (the bound is {})",
    "files": "one of its processes held {} files open (the bound is {})",
}


def measure(members, roots, bounds: Bounds) -> dict[str, int]:
    """What the processes use now, in REASONS' terms: tasks, memory (MiB; shared pages
    counted once past the plain sum's bound), the writable folders' MiB and files, and
    the most files one process holds open."""
    tasks, rss, files = 0, 0, [0]
    for p in members:
        try:
            tasks += p.num_threads()
            rss += p.memory_info().rss
            files.append(p.num_fds())
        except psutil.Error:
            continue
    if (
        rss > bounds.memory_mb * MiB
    ):  # pages shared (a fork's, a library's) counted once
        rss = _proportional_memory(members)
    written = [_used(folder) for folder in writable_folders(roots)]
    return {
        "tasks": tasks,
        "memory_mb": rss // MiB,
        "files": max(files),
        "disk_mb": sum(b for b, _ in written) // MiB,
        "disk_files": sum(n for _, n in written),
    }


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


def writable_folders(roots) -> set[str]:
    """The folders the sandboxes may write: their bwrap's --bind SRC DEST arguments."""
    out = set()
    for root in roots:
        try:
            argv = root.cmdline()
        except psutil.Error:
            continue
        out.update(argv[i + 1] for i, a in enumerate(argv[:-2]) if a == "--bind")
    return out


def _used(folder: str) -> tuple[int, int]:
    """Bytes on disk and files (and folders) under `folder`."""
    total, count = 0, 0
    for where, dirs, names in os.walk(folder):
        count += len(dirs) + len(names)
        for name in names:
            try:
                total += os.lstat(os.path.join(where, name)).st_blocks * 512
            except OSError:
                pass
    return total, count


def _proportional_memory(members) -> int:
    """The processes' memory, each shared page divided among those that share it (PSS:
    4 ms a process, so only when their plain resident sum passes the bound)."""
    total = 0
    for p in members:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass
    return total


def _environ(p: psutil.Process) -> dict:
    try:
        return p.environ()
    except psutil.Error:
        return {}


def _children(p: psutil.Process) -> list[psutil.Process]:
    try:
        return p.children(recursive=True)
    except psutil.Error:
        return []
