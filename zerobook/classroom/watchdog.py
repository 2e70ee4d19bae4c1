"""The watchdog of one grading job (zerobook.classroom.limits has the bounds): every 0.1 s it
adds up what the job's sandboxes use (tasks, memory with shared pages counted once,
bytes and files in the folders they may write, the open files of each process); past a
bound it kills them all (SIGKILL: none waits for its children), keeping the reason.

    with Watchdog(job_env(0, bounds), bounds) as watchdog:
        ...  # grade one submission; watchdog.reason: why it was stopped, or None
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import asdict

import psutil

from zerobook.classroom.limits import JOB_ENV, UID_ENV, Bounds, MiB, kill_uid


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
        """Every process of the job's sandboxes, and the sandboxes' bwrap processes: one
        read of /proc/PID/status a process (psutil's name and uids took four times the
        CPU, ~0.1 ms a process of the machine ten times a second, per job)."""
        table = _status_table()
        below: dict[int, list[int]] = {}
        for pid, (_, ppid, _) in table.items():
            below.setdefault(ppid, []).append(pid)
        marked = {
            pid
            for pid, (name, _, _) in table.items()
            if name == "bwrap" and _environ(pid).get(JOB_ENV) == self.marker
        }
        # a sandbox's own processes inherit the marker: one named bwrap is no root (its
        # arguments could name any folder for the disk bound to walk)
        roots = [pid for pid in marked if not _below(pid, marked, table)]
        found = {p for p, (_, _, uid) in table.items() if uid == self.uid is not None}
        todo, seen = list(roots), set()
        while todo:  # the sandboxes and everything under them
            pid = todo.pop()
            if pid not in seen:
                seen.add(pid)
                todo += below.get(pid, [])
        return _processes(found | seen), _processes(roots)

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


def _below(pid: int, marked: set, table: dict) -> bool:
    """Whether one of `pid`'s ancestors (in `table`: pid -> (name, parent, uid)) is marked."""
    seen, parent = set(), table.get(pid, ("", 0, None))[1]
    while parent and parent not in seen:
        if parent in marked:
            return True
        seen.add(parent)
        parent = table.get(parent, ("", 0, None))[1]
    return False


def _environ(pid: int) -> dict:
    try:
        return psutil.Process(pid).environ()
    except psutil.Error:
        return {}


def _processes(pids) -> list[psutil.Process]:
    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return out


def _status_table() -> dict[int, tuple[str, int, int]]:
    """pid -> (name, parent's pid, real uid) of every process, from /proc/PID/status
    (psutil's, where there is no /proc: macOS)."""
    if not os.path.isdir("/proc"):
        return _psutil_table()
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as status:
                text = status.read(2048)
        except OSError:  # gone
            continue
        name, ppid = "", 0
        for line in text.split(b"\n"):
            if line.startswith(b"Name:"):
                name = line[5:].strip().decode(errors="replace")
            elif line.startswith(b"PPid:"):
                ppid = int(line[5:])
            elif line.startswith(b"Uid:"):
                table[int(entry)] = (name, ppid, int(line.split()[1]))
                break
    return table


def _psutil_table() -> dict[int, tuple[str, int, int]]:
    table = {}
    for p in psutil.process_iter(["name", "ppid", "uids"]):
        uids = p.info["uids"]
        table[p.pid] = (p.info["name"] or "", p.info["ppid"] or 0, uids and uids.real)
    return table
