"""Is the grading environment whole? Asked when a submission lost points or could not be graded.

`Health.problem` says what broke on the course's side, or None:

- the installed environment changed while the submission was graded (`fingerprint`: the
  interpreter, its site-packages, torch or nbgrader replaced: a virtual
  environment rebuilt underneath the grader);
- a fresh process of the grading interpreter cannot import what grading runs (`check`:
  torch, zerobook, the clean run, the lab's harness, nbgrader), or (sandboxed)
  bubblewrap cannot make a sandbox.

The check takes seconds (it imports torch); a passing one is remembered for as long as every
file it loaded, the folder of each and every folder on its import path stay as they were
(stat calls only), so a class costs one check per lab unless something changes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HEALTH_TIMEOUT_S = 300  # imports on a machine busy grading other submissions
WATCHED = ("torch", "nbgrader")  # in site-packages: replaced = changed
# imported in this order by the check; the lab's own harness after zerobook.labs.harness
MODULES = (
    "torch",
    "torch.distributed",
    "zerobook",
    "zerobook.grading",
    "zerobook.launcher.rank_entry",
    "zerobook.classroom.clean_score",
    "zerobook.labs.harness",
    "nbgrader.apps",
)
# run by the check: the first import that fails, or every file loaded (shared objects
# included) and the import path
CHECK = """\
import importlib, json, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        print(json.dumps({"error": f"import {name}: {type(exc).__name__}: {exc}"}))
        raise SystemExit(1)
files = {getattr(module, "__file__", None) for module in list(sys.modules.values())}
try:
    with open("/proc/self/maps") as maps:
        fields = [line.split(None, 5) for line in maps]
    files |= {f[5].strip() for f in fields if len(f) == 6 and f[5].startswith("/")}
except OSError:
    pass
print(json.dumps({"read": sorted(f for f in files if f), "path": sys.path}))
"""


def stats(paths) -> dict[str, tuple | None]:
    """path -> (inode, mtime, size) of each path (None: missing); stat calls only."""
    out = {}
    for path in paths:
        try:
            st = os.stat(path or ".")
            out[path] = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            out[path] = None
    return out


def fingerprint() -> dict[str, tuple | None]:
    """stats of the installed environment: the interpreter, site-packages and WATCHED in it."""
    site = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    return stats([sys.executable, *site, *(f"{s}/{n}" for s in site for n in WATCHED)])


def changed(before: dict, now: dict) -> str | None:
    """The paths replaced, removed or added between two fingerprints, in words; None if none."""
    paths = [path for path in before if before[path] != now.get(path)]
    if not paths:
        return None
    return (
        "the grading environment changed while this submission was graded "
        f"(replaced: {', '.join(paths)})"
    )


def harness_modules(lab: str) -> list[str]:
    """MODULES, with lab `lab`'s harness (zerobook.labs.LAB) after the shared one, if the
    course has one (a lab without a harness module is the course's layout, not a breakage)."""
    import zerobook

    own = Path(zerobook.__file__).parent / "labs" / f"{lab}.py"
    at = MODULES.index("zerobook.labs.harness") + 1
    extra = [f"zerobook.labs.{lab}"] if own.is_file() else []
    return [*MODULES[:at], *extra, *MODULES[at:]]


def check(lab: str, sandboxed: bool) -> tuple[str | None, list[str]]:
    """(why the grading environment cannot grade `lab` now, or None; the paths a passing
    check read: its files, their folders, its import path, bubblewrap if sandboxed)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHECK, *harness_modules(lab)],
            capture_output=True,
            text=True,
            timeout=HEALTH_TIMEOUT_S,
        )
    except OSError as exc:
        return f"the grading interpreter {sys.executable} cannot start: {exc}", []
    except subprocess.TimeoutExpired:
        return f"importing {lab}'s modules took over {HEALTH_TIMEOUT_S} s", []
    lines = done.stdout.strip().splitlines()
    found = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    if done.returncode or "read" not in found:
        tail = done.stderr.strip()[-300:]
        why = f"the grading interpreter exited {done.returncode} importing {lab}'s modules: {tail}"
        return found.get("error", why), []
    read = {*found["read"], *map(os.path.dirname, found["read"]), *found["path"]}
    if sandboxed:
        from zerobook.classroom.sandbox import available

        why = available.__wrapped__()  # now, not as first found (it is cached)
        if why:
            return f"the sandbox: {why}", []
        read.add(shutil.which("bwrap") or "bwrap")
    return None, sorted(read)


class Health:
    """The grading environment, checked when a submission needs it (see the module)."""

    def __init__(self, sandboxed: bool):
        self.sandboxed = sandboxed
        self.passed: dict[str, dict] = {}  # lab -> stats of what its passing check read

    def problem(self, lab: str, before: dict) -> str | None:
        """What broke on the course's side while or since the submission began to be graded
        (`before`: the fingerprint taken then), or None."""
        why = changed(before, fingerprint())
        seen = self.passed.pop(lab, None)
        if why:
            return why
        if seen is not None and stats(seen) == seen:
            self.passed[lab] = seen
            return None
        why, read = check(lab, self.sandboxed)
        if why is None:
            self.passed[lab] = stats(read)
        return why
