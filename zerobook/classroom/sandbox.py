"""A sandbox per submission (bubblewrap, `bwrap`): what a student's code can see and
touch while the instructor grades it.

    command(["python", "-c", "..."], writable=[submission_dir])  # an argv to run

Inside: the system's programs and libraries, the interpreter, the venv and the zerobook
package, all read-only (at their real paths: a venv may be a link to a shared one, an
editable install may point at another checkout); the folders named `writable` (the
submission's own copy) read-write; a private /tmp and /dev/shm (tmpfs of the
submission's disk bound) and HOME; nothing else of the course (no labs/, no other
submissions, no gradebook, no ZEROBOOK_COURSE_ROOT). Namespaces: a network with only
loopback (gloo still works over it), a PID namespace (every process the submission
starts dies with the sandbox), and an unprivileged user with no capabilities: a root
grader's job uid (zerobook.classroom.limits), else uid UID of a user namespace. Limits: address
space and file size per process (LIMITS), the submission's bounds (zerobook.classroom.limits: per
process here, all its processes together by the grader's watchdog); time is the
caller's (a cell's timeout, a launch's timeout). Linux only; `available()` says why not.
What is bound inside and which variables pass: zerobook.classroom.sandbox_contents.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys

from zerobook.trust.graded_rank import GRADED_ENV
from zerobook.classroom import limits
from zerobook.classroom.sandbox_contents import (
    folders_to,
    passed_env,
    read_only_roots,
    system_binds,
    tmpfs,
)

LIMITS = {
    resource.RLIMIT_AS: 24 * 2**30,
    resource.RLIMIT_FSIZE: 256 * 2**20,
    resource.RLIMIT_CORE: 0,
}
UID = 1000  # the student's uid inside (outside, its files belong to whoever graded)
OFF_ENV = (
    "ZEROBOOK_NO_SANDBOX"  # "1": command() runs argv as it is (grade --no-sandbox)
)


@functools.lru_cache(maxsize=1)
def available() -> str | None:
    """None if bubblewrap works here; else why not (for the instructor's error message)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return "bubblewrap is not installed (Debian package `bubblewrap`: apt-get install bubblewrap)"
    done = subprocess.run(command(["true"]), capture_output=True, text=True)
    if done.returncode:
        why = f"bwrap cannot make a sandbox here: {done.stderr.strip()[-300:]}"
        if "Unknown option" in done.stderr or "not permitted in setuid" in done.stderr:
            version = (
                subprocess.run(
                    [bwrap, "--version"], capture_output=True, text=True
                ).stdout.strip()
                or "an unknown version"
            )
            why += f" (zerobook needs bubblewrap >= 0.7, not setuid: {version})"
        return why
    return None


def command(
    argv: list[str],
    writable=(),
    cwd: str | None = None,
    env: dict | None = None,
    environ=None,
    readable=(),
) -> list[str]:
    """`argv` wrapped in bwrap: the sandbox above, with `writable` folders bound read-write at
    their own paths, `cwd` (default: the first writable one) as its working directory; inside,
    only passed_env(environ) (default: this process's), HOME and the caches in its private /tmp,
    and `env`. With OFF_ENV=1 in this process's environment: argv itself, unsandboxed.
    A root grader's job uid (zerobook.classroom.limits.job_uid) is given the writable folders and
    the readable files, and the processes inside run as it."""
    if os.environ.get(OFF_ENV) == "1":
        return list(argv)
    uid, bounds = limits.job_uid(), limits.Bounds.from_env()
    args = ["bwrap", *namespaces(uid), "--die-with-parent", *system_binds()]
    args += tmpfs("/tmp", bounds)  # first: a venv may live under /tmp
    real = os.path.realpath
    binds = [("--ro-bind", root, root) for root in read_only_roots()]
    binds += [("--bind", real(folder), real(folder)) for folder in writable]
    binds += [("--ro-bind", real(path), real(path)) for path in readable]  # files
    args += [
        *folders_to(dest for *_, dest in binds),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    args += tmpfs("/dev/shm", bounds)
    args += [a for bind in binds for a in bind]
    if uid is not None:
        for path in [*writable, *readable]:
            os.chown(path, uid, uid)
    where = cwd or (os.path.realpath(writable[0]) if writable else "/tmp")
    inside = {
        **passed_env(os.environ if environ is None else environ),
        "HOME": "/tmp/home",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "IPYTHONDIR": "/tmp/ipython",
        "TMPDIR": "/tmp",
        **(env or {}),
    }
    args += ["--chdir", where, "--clearenv"] + [
        a for k, v in inside.items() for a in ("--setenv", k, str(v))
    ]
    return args + ["--", *as_student(uid, bounds), *inside_argv(argv)]


def namespaces(uid: int | None) -> list[str]:
    """Every namespace; the user namespace (uid UID inside, the caller outside) unless a
    root grader gave a job uid, which as_student switches to inside instead (a user
    namespace would map the student to root outside, whom RLIMIT_NPROC never counts)."""
    if uid is None:
        return [
            "--unshare-all",
            "--uid",
            str(UID),
            "--gid",
            str(UID),
            "--cap-drop",
            "ALL",
        ]
    return [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]


def as_student(uid: int | None, bounds) -> list[str]:
    """The start of the command inside: become the job's uid with no capabilities (a
    root grader); else bound the tasks of the sandbox's own user namespace (RLIMIT_NPROC
    set inside it counts only its processes)."""
    if uid is None:
        return ["prlimit", f"--nproc={bounds.tasks + limits.SLACK}", "--"]
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def inside_argv(argv: list[str]) -> list[str]:
    """argv with this interpreter named by its path inside (interpreter())."""
    return [interpreter() if a == sys.executable else a for a in argv]


def interpreter() -> str:
    """This interpreter as the sandbox has it: in its environment's real folder (a venv
    that is a symbolic link is bound at its real path), never resolved past it
    (bin/python links out of the venv to the system's interpreter)."""
    exe = os.path.abspath(sys.executable)
    if exe.startswith(sys.prefix + os.sep):
        inside_venv = os.path.relpath(exe, sys.prefix)
        return os.path.join(os.path.realpath(sys.prefix), inside_venv)
    return os.path.realpath(exe)


def set_limits() -> None:
    """preexec_fn for the sandbox's process: the per-process limits of LIMITS, and the
    submission's bounds that are per process (zerobook.classroom.limits): CPU time, open files,
    and (for a job uid, which as_student switches to inside) its tasks."""
    bounds = limits.Bounds.from_env()
    more = {
        resource.RLIMIT_CPU: bounds.cpu_s,
        resource.RLIMIT_NOFILE: bounds.files + limits.SLACK,
    }
    if limits.job_uid() is not None:
        more[resource.RLIMIT_NPROC] = bounds.tasks + limits.SLACK
    for limit, value in {**LIMITS, **more}.items():
        resource.setrlimit(limit, (value, value))


class RankSandbox:
    """What zb.torchrun(sandbox=...) runs torchrun and its ranks in: bubblewrap with
    `writable` folders (and the run's report folder) writable, the current folder as
    theirs, each process started under set_limits (grading: the student's code sees
    nothing else)."""

    def __init__(self, writable):
        self.writable = [str(folder) for folder in writable]

    def wrap(self, argv: list[str], report_dir: str, environ: dict) -> list[str]:
        writable = [report_dir, *self.writable]
        environ[GRADED_ENV] = (
            "1"  # each rank confined (zerobook.trust.graded_rank), --no-sandbox too
        )
        return command(
            argv,
            writable=writable,
            cwd=os.getcwd(),
            environ=environ,
        )

    @staticmethod
    def set_limits() -> None:
        set_limits()
