"""What every lab harness shares: import the student's file, and call into it safely.

The harness is trusted course code; the student's file is not. A student's `sys.exit()` or a
missing solution becomes an ordinary exception that names the function, so the launcher reports
it like any other failing rank.

The course's package holds its own implementation of what each lab grades (the
chapters teach with it). `load_student(path, withheld)` makes those functions fail when
the student's code calls them (the harness's own calls still work), and `call_student`
refuses a graded function that is the course's code itself: a part that borrows the
idea scores 0, saying why. A copy of the installed source is not stopped this way.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # zerobook/
# an instructor's hidden parameters for this lab's harness, as JSON (the classroom sets it
# from a private labs/LAB/hidden_params.json; see lab_params)
PARAMS_ENV = "ZEROBOOK_LAB_PARAMS"
# the student's calls in progress (they nest: a hook calls a unit, which calls gather)
_calls = [0]
_taken: list[str] = []  # withheld functions the student's code called, in order


class Withheld(RuntimeError):
    """The student's file used the course's own implementation of what a part grades."""


def parse_args(parts: list[str], argv=None) -> argparse.Namespace:
    """`--student FILE --part NAME`, the command line every harness takes. NAME may list
    several parts, joined by commas, for one launch that runs each (`cli.parts`)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--student", required=True, help="the student's .py file")
    parser.add_argument("--part", required=True)
    cli = parser.parse_args(argv)
    cli.parts = cli.part.split(",")
    unknown = [part for part in cli.parts if part not in parts]
    if unknown:
        parser.error(
            f"no part {', '.join(unknown)}: this harness has {', '.join(parts)}"
        )
    return cli


def lab_params(**defaults):
    """The harness's parameters: `defaults`, each replaced by the instructor's hidden value
    where PARAMS_ENV gives one (seeds, sizes, steps the students never saw). A key the
    harness does not have, or a value of another type, is an error that says which."""
    given = json.loads(os.environ.get(PARAMS_ENV) or "{}")
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(
            f"hidden parameters {unknown}: this lab's harness takes {sorted(defaults)}"
        )
    for key, value in given.items():
        if type(value) is not type(defaults[key]):
            raise TypeError(
                f"hidden parameter {key}={value!r}: a "
                f"{type(defaults[key]).__name__} like {defaults[key]!r}"
            )
    return {**defaults, **given}


def load_student(path: str, withheld=()):
    """Import the student's file as a module named `student` (from the file, not
    sys.path), the course's functions named in `withheld` (as `withhold` spells them)
    unavailable to it."""
    file = Path(path).resolve()
    if not file.is_file():
        raise FileNotFoundError(
            f"student file {path!r} not found: run the cell that writes it"
        )
    import zerobook
    from zerobook import dist, report_guard

    withhold(*withheld)
    harness = inspect.currentframe().f_back.f_globals
    report_guard.guard(
        harness, owners=(zerobook, dist)
    )  # from now on only the harness's code reports
    spec = importlib.util.spec_from_file_location("student", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["student"] = module
    spec.loader.exec_module(module)
    return module


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
        if not _calls[0]:
            return original(*args, **kwargs)
        _taken.append(name)
        raise Withheld(
            f"{name} is the course's own implementation of what this part grades: "
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


def call_student(module, name: str, *args):
    """Call the student's function `name`; leaving the process is not allowed to end the
    run, nor handing over (or calling) the course's own implementation of what is graded."""
    function = getattr(module, name, None)
    if function is None:
        raise AttributeError(f"your file defines no function {name!r}")
    borrowed = course_origin(function)
    if borrowed:
        raise Withheld(
            f"your {name} is {borrowed}, the course's own code: "
            "a graded function must be written in your file"
        )
    before = len(_taken)
    _calls[0] += 1
    try:
        result = function(*args)
    except SystemExit as exc:
        raise RuntimeError(
            f"{name}() called sys.exit({exc.code!r}); return a value instead"
        ) from None
    except NotImplementedError:
        raise NotImplementedError(f"{name}() is not implemented yet") from None
    finally:
        _calls[0] -= 1
    if len(_taken) > before:  # the student's code caught the refusal: still not its own
        raise Withheld(
            f"{name}() called {_taken[before]}, the course's own "
            "implementation of what this part grades; write your own"
        )
    return result


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
            raise ImportError(
                f"{name} is {whose} of what this lab grades: "
                "write yours (a submission that uses it scores 0)"
            )
        return None


def forbid(names: tuple[str, ...]) -> dict[str, str]:
    """Make the modules `names` unimportable from now on (unloaded if loaded); returns
    each one's source file, for `borrowed` to know a copy loaded some other way."""
    files = {n: str(Path(importlib.util.find_spec(n).origin).resolve()) for n in names}
    for name in names:
        sys.modules.pop(name, None)
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and child in vars(sys.modules[parent]):
            delattr(sys.modules[parent], child)
    sys.meta_path.insert(0, Forbidden(names))
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
    for value in vars(student).values():
        if source_file(value) in paths:  # a module object
            found.add(value.__name__)
        classes = value.__mro__ if isinstance(value, type) else ()
        for item in [value, *(a for klass in classes for a in vars(klass).values())]:
            code = getattr(item, "__code__", None)
            if code is not None and str(Path(code.co_filename).resolve()) in paths:
                found.add(getattr(item, "__module__", None) or code.co_filename)
    return sorted(found)


def trusted(*owners, **functions) -> list[tuple]:
    """What a run's record depends on, as it is before the student's file is imported:
    each class's own functions in `owners`, and `functions` (name=owner)."""
    found = [(o, n, v) for o in owners for n, v in vars(o).items() if callable(v)]
    return found + [(o, n, inspect.getattr_static(o, n)) for n, o in functions.items()]


def replaced(snapshot: list[tuple]) -> list[str]:
    """The functions of `snapshot` that the student's code has replaced since."""
    now = [(o, n, inspect.getattr_static(o, n, None)) for o, n, _ in snapshot]
    changed = [(o, n) for (o, n, v), (_, _, w) in zip(snapshot, now) if w is not v]
    return sorted(f"{getattr(o, '__qualname__', o.__name__)}.{n}" for o, n in changed)
