"""What a grading sandbox holds: the folders bound into it and the environment that reaches it.

    system_binds()           # /usr, /bin, /lib, ... read-only; the few files of /etc programs read
    read_only_roots()        # the interpreter, the venv and the zerobook package (real paths)
    folders_to(paths)        # the folders on the way to the binds, traversable by a job uid
    tmpfs("/tmp", bounds)    # a private tmpfs, the size of the submission's disk bound
    passed_env(os.environ)   # the variables that reach inside (PASSED_ENV's), less HIDDEN_ENV

zerobook.classroom.sandbox puts them together into one bwrap command.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from zerobook.classroom import limits

# what programs read from /etc: not shadow, not the machine's secrets
ETC = [
    "passwd",
    "group",
    "hosts",
    "nsswitch.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "alternatives",
    "fonts",
]
# prefixes of what reaches inside; nothing else does
PASSED_ENV = (
    "PATH",
    "LANG",
    "LC_",
    "TERM",
    "OMP_",
    "MKL_",
    "PYTHON",
    "ZEROBOOK_",
    "TORCH",
    "PYTORCH_",
    "NCCL_",
    "GLOO_",
    "CUDA_",
    "NVIDIA_",
    "MASTER_",
    "TORCHELASTIC_",
)
HIDDEN_ENV = ("ZEROBOOK_COURSE_ROOT",)  # the course directory: never inside


def read_only_roots() -> list[str]:
    """The interpreter, the venv and the zerobook package (real paths): what Python needs."""
    found = (sys.prefix, sys.base_prefix, *package_folders())
    roots = {os.path.realpath(p) for p in found}
    return sorted(
        r for r in roots if not any(r != o and r.startswith(o + os.sep) for o in roots)
    )


@functools.lru_cache(maxsize=1)
def package_folders() -> list[str]:
    """zerobook's folder as this process imported it, and as this interpreter finds it
    from elsewhere (an editable install may point at another checkout than the one
    grading runs in)."""
    import zerobook

    found = [str(Path(zerobook.__file__).parent)]
    done = subprocess.run(
        [sys.executable, "-c", "import zerobook; print(zerobook.__file__)"],
        cwd="/",
        env=passed_env(os.environ),
        capture_output=True,
        text=True,
    )
    if done.returncode == 0 and done.stdout.strip():
        found.append(str(Path(done.stdout.strip()).parent))
    return found


def system_binds() -> list[str]:
    """/usr read-only, /bin /lib /lib64 /sbin as the system has them (links or folders), the few
    files of /etc that programs read."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    args += ["--perms", "0755", "--dir", "/etc"]  # else root's only: a job uid reads it
    for name in ETC:
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    return args


def passed_env(environ) -> dict:
    """The variables of `environ` that reach the sandbox: those starting with PASSED_ENV's
    prefixes, less HIDDEN_ENV (the instructor's other variables, tokens and paths stay out)."""
    return {
        k: v
        for k, v in environ.items()
        if k.startswith(PASSED_ENV) and k not in HIDDEN_ENV
    }


def folders_to(paths) -> list[str]:
    """The folders on the way to `paths` that only the sandbox has, made traversable by
    anyone (bwrap makes them for root only; a job uid inside must pass through them)."""
    paths = sorted(set(paths))
    way = {str(p) for path in paths for p in Path(path).parents}
    way = sorted(
        w
        for w in way - {"/", "/tmp"}
        if not any(w == p or w.startswith(p + os.sep) for p in paths)
    )
    return [a for w in way for a in ("--perms", "0755", "--dir", w)]


def tmpfs(path: str, bounds) -> list[str]:
    """A private tmpfs at `path`, writable by anyone inside, the disk bound's size."""
    size = str(bounds.disk_mb * limits.MiB)
    return ["--perms", "1777", "--size", size, "--tmpfs", path]
