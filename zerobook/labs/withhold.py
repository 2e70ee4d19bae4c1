"""The course's own implementation of what a lab grades, kept from the student's file.

    withhold("zerobook.train.measure:unique_bytes")   # fails when the student's code calls it
    files = forbid(("zerobook.data_parallel.ddp",))   # unimportable while the file runs
    with student_code():                          # zerobook.labs.harness: the file runs
        ...
    borrowed(student_module, files)               # what it used anyway

The course's package holds its own implementation of what each lab grades (the chapters teach
with it). Where the harness needs it itself, `withhold` puts a guard in its place that fails
inside the student's code (the harness's own calls still work), and `student_code` watches every
Python call the student's code makes (sys.setprofile) for the original's code, however the file
reached it (a guard's closure, gc, a module's globals): a call is recorded in `taken`, and the
harness refuses the part. Where the harness does not need it, `forbid` makes the module
unimportable, and the grading sandbox hides its file (zerobook.classroom.unseen.files); `borrowed`
finds a copy loaded from the file by another name, and an import guard taken off sys.meta_path.
A copy of the source pasted into the student's file is not stopped here: the classroom's review
flags it (zerobook.classroom.review).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import threading
import types
from pathlib import Path

from zerobook.trust.restricted import PolicyViolation

PACKAGE = Path(__file__).resolve().parents[1]  # zerobook/
calls = [
    0
]  # the student's calls in progress (they nest: a hook calls a unit, which calls gather)
taken: list[str] = []  # withheld functions the student's code called, in order
# the withheld originals' bytecode (nested functions' too) -> [(the names it uses, course name)]:
# a copy compiled again elsewhere (another file, another first line, other local names) matches
_codes: dict[bytes, list] = {}
_guards: list = []  # the Forbidden hooks forbid() put on sys.meta_path


# PyTorch's DDP: its reducer fills buckets in arrival order and all-reduces them during
# backward, through a comm hook if given: what the DDP lab and the capstone grade
TORCH_DDP = tuple(
    f"{module}:{name}"
    for module in ("torch.distributed", "torch._C._distributed_c10d")
    for name in (
        "Reducer",
        "_register_comm_hook",
        "_register_builtin_comm_hook",
        "_compute_bucket_assignment_by_size",
    )
) + ("torch.nn.parallel:DistributedDataParallel",)


class Withheld(RuntimeError):
    """The student's file used the course's own implementation of what a part grades."""


def withhold(*paths: str) -> None:
    """Each "module:function" or "module:Class.method" fails when the student's code
    calls it, wherever zerobook's modules hold it (imported by name too); called by the
    harness, it works as before."""
    for path in paths:
        module_name, _, attribute = path.partition(":")
        *classes, name = attribute.split(".")
        owner = importlib.import_module(module_name)
        for cls in classes:
            owner = getattr(owner, cls)
        original = getattr(owner, name)
        guard = _guard(original, f"{module_name}.{attribute}")
        if isinstance(original, types.FunctionType):
            _remember(original.__code__, guard.course_name)
        setattr(owner, name, guard)
        if not classes:
            _replace_in_modules(name, original, guard)


def _replace_in_modules(name: str, original, guard) -> None:
    """`guard` for `original` in every zerobook module that imported it by `name`."""
    for key, module in list(sys.modules.items()):
        if key.startswith("zerobook") and getattr(module, name, None) is original:
            setattr(module, name, guard)


def _guard(original, name: str):
    def withheld(*args, **kwargs):
        if not calls[0]:
            return original(*args, **kwargs)
        taken.append(name)
        whose = "PyTorch's" if name.startswith("torch") else "the course's"
        raise Withheld(
            f"{name} is {whose} own implementation of what this part grades: "
            "under the grader it is not available to your file; write your own"
        )

    withheld.course_name = name
    return withheld


def course_origin(function) -> str | None:
    """The course's name of `function` if it is the course's own code, else None."""
    if getattr(function, "course_name", None):
        return function.course_name
    code = getattr(function, "__code__", None)
    if code is not None and Path(code.co_filename).resolve().is_relative_to(PACKAGE):
        return f"{function.__module__}.{function.__qualname__}"
    return None


class ForbiddenImport(PolicyViolation):
    """The student's file imported what a lab grades from the course or a library: the
    run scores 0 (zerobook.labs.crash lets it end the run, not one step)."""


class Forbidden:
    """An import hook, first on sys.meta_path: the course's own implementation of what a
    lab grades cannot be imported while the student's file runs."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name in self.names or name.startswith(tuple(n + "." for n in self.names)):
            whose = (
                "the course's own implementation"
                if name.startswith("zerobook")
                else "a library's implementation"
            )
            raise ForbiddenImport(
                f"{name} is {whose} of what this lab grades: "
                "write yours (a submission that uses it scores 0)"
            )
        return None


def forbid(names: tuple[str, ...]) -> dict[str, str]:
    """Make the modules `names` unimportable from now on (unloaded if loaded); returns
    each one's source file, for `borrowed` to know a copy loaded some other way."""
    files = {n: str(Path(importlib.util.find_spec(n).origin).resolve()) for n in names}
    # and the names a moved module is also loaded under (zerobook/_moved.py: zerobook.ddp is
    # zerobook.data_parallel.ddp), each an attribute of its parent too (zb.ddp)
    loaded = [sys.modules[n] for n in names if n in sys.modules]
    aliases = [n for n, m in list(sys.modules.items()) if any(m is x for x in loaded)]
    for name in dict.fromkeys([*names, *aliases]):
        sys.modules.pop(name, None)
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and child in vars(sys.modules[parent]):
            delattr(sys.modules[parent], child)
    _guards[:] = [Forbidden(names)]  # one forbid() a run: its hook is the one checked
    sys.meta_path.insert(0, _guards[0])
    return files


def source_file(thing) -> str:
    """A module's file, resolved ("-" for anything else)."""
    file = getattr(thing, "__file__", None)
    return str(Path(file).resolve()) if isinstance(file, str) else "-"


def borrowed(student, files: dict[str, str]) -> list[str]:
    """The forbidden modules the run used anyway: loaded under any name, held by the
    student's module, or defining one of its functions, classes or their methods."""
    paths = set(files.values())
    modules = list(sys.modules.items())
    found = {name for name, module in modules if source_file(module) in paths}
    if any(hook not in sys.meta_path for hook in _guards):
        found.add("sys.meta_path (the grader's import guard, taken off it)")
    for value in vars(student).values():
        if source_file(value) in paths:  # a module object
            found.add(value.__name__)
        classes = value.__mro__ if isinstance(value, type) else ()
        for item in [value, *(a for klass in classes for a in vars(klass).values())]:
            code = getattr(item, "__code__", None)
            if code is not None and str(Path(code.co_filename).resolve()) in paths:
                found.add(getattr(item, "__module__", None) or code.co_filename)
    return sorted(found)


def _remember(code, name: str) -> None:
    _codes.setdefault(code.co_code, []).append((code.co_names, name))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _remember(const, name)


def _profile(frame, event, arg) -> None:
    if event == "call" and calls[0]:
        code = frame.f_code
        for names, name in _codes.get(code.co_code, ()):
            if names == code.co_names:
                taken.append(name)
                break


@contextlib.contextmanager
def student_code():
    """The student's code runs inside: withheld guards refuse, and calls into a withheld
    original are recorded in `taken` (watched only where something is withheld, in this
    thread and the threads it starts)."""
    outermost, watched = calls[0] == 0, bool(_codes)
    if outermost and watched:
        before = sys.getprofile(), threading.getprofile()
        sys.setprofile(_profile)
        threading.setprofile(_profile)
    calls[0] += 1
    try:
        yield
    finally:
        calls[0] -= 1
        if outermost and watched:
            intact = sys.getprofile() is _profile
            sys.setprofile(before[0])
            threading.setprofile(before[1])
            if not intact:
                taken.append("sys.setprofile (the grader's watch on the course's code)")
