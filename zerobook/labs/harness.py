"""What every lab harness shares: import the student's file, and call into it safely.

The harness is trusted course code; the student's file is not. A student's `sys.exit()` or a
missing solution becomes an ordinary exception that names the function, so the launcher reports
it like any other failing rank.
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
from pathlib import Path


def parse_args(parts: list[str], argv=None) -> argparse.Namespace:
    """`--student FILE --part NAME`, the command line every harness takes."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--student", required=True, help="the student's .py file")
    parser.add_argument("--part", required=True, choices=parts)
    return parser.parse_args(argv)


def load_student(path: str):
    """Import the student's file as a module named `student` (from the file, not sys.path)."""
    file = Path(path).resolve()
    if not file.is_file():
        raise FileNotFoundError(f"student file {path!r} not found: run the cell that writes it")
    from zerobook import report_guard

    report_guard.guard(inspect.currentframe().f_back.f_globals)  # from now on only the harness's code reports
    spec = importlib.util.spec_from_file_location("student", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["student"] = module
    spec.loader.exec_module(module)
    return module


def call_student(module, name: str, *args):
    """Call the student's function `name`; leaving the process is not allowed to end the run."""
    function = getattr(module, name, None)
    if function is None:
        raise AttributeError(f"your file defines no function {name!r}")
    try:
        return function(*args)
    except SystemExit as exc:
        raise RuntimeError(f"{name}() called sys.exit({exc.code!r}); return a value instead") from None
    except NotImplementedError:
        raise NotImplementedError(f"{name}() is not implemented yet") from None
