"""What every lab harness shares: import the student's file, and call into it safely.

The harness is trusted course code; the student's file is not. A student's `sys.exit()` or a
missing solution becomes an ordinary exception that names the function, so the launcher reports
it like any other failing rank.

`load_student(path)` imports the file under its lab's rules (zerobook.trust.policy: an
allow-list of modules and names, so the course's own implementation of what the lab grades,
PyTorch's, and the grader itself are out of its reach: a file that names them scores 0, saying
which line). The rules keep torch as the harness measures with it: the file changes no class it
did not make, no module and no function, hides no library method on an object
(zerobook.trust.restricted) and pushes no torch function or dispatch mode (zerobook.trust.policy).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import types
from pathlib import Path

# an instructor's hidden parameters for this lab's harness, as JSON (the classroom sets it
# from a private labs/LAB/hidden_params.json; see lab_params)
PARAMS_ENV = "ZEROBOOK_LAB_PARAMS"
loaded: list = [None]  # the student's file, once imported (its lines lead a failure)
_lab: list = [None]  # the lab whose rules the file runs under (zerobook.trust.policy)


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
    return frozen({**defaults, **given})


def frozen(value):
    """`value` read-only all the way down (dicts as mapping proxies, lists as tuples): a
    harness's settings, which no code in its process can change."""
    if isinstance(value, (dict, types.MappingProxyType)):
        return types.MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return frozenset(value) if isinstance(value, set) else value


def load_student(path: str):
    """Import the student's file as a module named `student` (from the file, not sys.path),
    under its lab's rules (zerobook.trust.restricted)."""
    file = Path(path).resolve()
    if not file.is_file():
        raise FileNotFoundError(
            f"student file {path!r} not found: run the cell that writes it"
        )
    import zerobook
    from zerobook.trust import report_guard
    from zerobook.launcher import dist

    harness = inspect.currentframe().f_back.f_globals
    report_guard.guard(harness, owners=(zerobook, dist))  # only the harness reports
    loaded[0] = str(file)
    _lab[0] = Path(harness["__file__"]).stem  # zerobook/labs/LAB.py
    os.environ.pop(PARAMS_ENV, None)  # read (lab_params); not left for the file to find
    return import_again(file, "student")


def import_again(path, name: str = "student_again"):
    """The student's file imported (again) as a module of its own, `name`, as load_student
    does: a second copy shares nothing the first kept in its globals (Lab 6 loads a checkpoint
    with it, so that a checkpoint kept in memory instead of on disk is not found)."""
    from zerobook.trust import restricted

    return restricted.load(path, name, _lab[0])


def call_student(module, name: str, *args):
    """Call the student's function `name`; leaving the process is not allowed to end the
    run."""
    function = getattr(module, name, None)
    if function is None:
        raise AttributeError(f"your file defines no function {name!r}")
    try:
        result = function(*args)
    except SystemExit as exc:
        raise RuntimeError(
            f"{name}() called sys.exit({exc.code!r}); return a value instead"
        ) from None
    except NotImplementedError:
        raise NotImplementedError(f"{name}() is not implemented yet") from None
    return result


def refuse(idea: str, flight=None, more=()) -> None:
    """Raise RuntimeError (the part scores 0) naming every reason the run does not count:
    `flight`'s record rewritten (zerobook.data_parallel.inflight) and `more` (reasons of the
    lab's own). `idea`: what the student writes ("your DDP"). (A function the record is made
    with cannot be replaced: zerobook.trust.restricted.)"""
    problems = []
    rewritten = flight.tampered() if flight is not None else None
    problems += [f"tampering: the run's record was rewritten: {rewritten}"] * bool(
        rewritten
    )
    problems += list(more)
    if problems:
        raise RuntimeError(
            "; ".join(problems)
            + f": write {idea} yourself (a run that does so scores 0)"
        )
