"""torch as a lab's harness found it: what the student's file, run in the harness's own
process, must leave as it was.

    before = untouched.take()     # zerobook.labs.harness.load_student, before the file runs
    untouched.check(before)       # after the file ran, after each call into it, before a report

The harness measures with torch (a parity difference is `(p - q).abs().max()`) and Python's
builtins. A student's file could replace `torch.Tensor.abs` by a function that returns zeros,
and every difference would read 0. `take` remembers every function of torch.Tensor, of the torch
modules the harnesses use and of the builtins, and how many torch function and dispatch modes
(`__torch_function__` / `__torch_dispatch__` interceptors) are active; `check` raises
TamperError naming whatever differs. What the harness replaces itself (its recorded collectives)
may differ from what it was when the file was loaded, but only by the course's own functions
(`collectives=True`); the harness's own functions are `zerobook.trust.report_guard`'s.

A replacement that puts itself back before the next check, or code that rewrites torch below
Python (ctypes, a kernel registered with torch.library), is not caught here: the classroom's
review of the file flags the means (zerobook.classroom.review).
"""

from __future__ import annotations

import builtins
import gc
import inspect
import json
import math
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

from zerobook.trust.report_guard import TamperError

# classes: their own functions and descriptors; modules: their functions and classes
CLASSES = (
    torch.Tensor,
    torch.nn.Module,
    torch.nn.Parameter,
    torch.optim.Optimizer,
    torch.optim.AdamW,
    torch.optim.SGD,
)
MODULES = (torch, torch.nn.functional, torch.autograd, builtins, json, math)
COLLECTIVES = (dist, distributed_c10d)  # the harness replaces some of these itself
PACKAGE = Path(__file__).resolve().parents[1]  # zerobook/
TORCH = Path(torch.__file__).resolve().parent


def _entries(owners, whole: bool) -> list[tuple]:
    """(owner, name, value) of `owners`' attributes: all of a class's, a module's callables."""
    out = []
    for owner in owners:
        for name, value in list(vars(owner).items()):
            if whole or callable(value):
                out.append((owner, name, value))
    return out


def _torch_code(function) -> bool:
    """A function of torch's own Python: torch wraps some itself on first use (an
    optimizer class's `step`, for its profiler hooks)."""
    code = getattr(function, "__code__", None)
    return code is not None and Path(code.co_filename).resolve().is_relative_to(TORCH)


def _course_code(function) -> bool:
    """A function of the course's package: a recorded collective the harness put in place
    (zerobook.data_parallel.comm, zerobook.data_parallel.inflight, zerobook.train.parity replace them while they measure)."""
    code = getattr(function, "__code__", None)
    return code is not None and Path(code.co_filename).resolve().is_relative_to(PACKAGE)


def _modes() -> tuple[int, int]:
    return torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()


def take() -> dict:
    """What `check` compares with: torch's functions, the collectives, the active modes."""
    return {
        "stable": _entries(CLASSES, True) + _entries(MODULES, False),
        "collectives": _entries(COLLECTIVES, False),
        "modes": _modes(),
        "names": {cls: set(vars(cls)) for cls in CLASSES},  # a new one shadows a base's
    }


def changed(before: dict, collectives: bool = True) -> list[str]:
    """The names of what differs from `before` (the collectives only if `collectives`)."""
    entries = [(e, False) for e in before["stable"]]
    entries += [(e, True) for e in before["collectives"]] if collectives else []
    out = []
    for (owner, name, value), harness_may in entries:
        now = inspect.getattr_static(owner, name, None)
        if (
            now is not value
            and not _torch_code(now)
            and not (harness_may and _course_code(now))
        ):
            out.append(
                f"{getattr(owner, '__qualname__', None) or owner.__name__}.{name}"
            )
    for cls, names in before["names"].items():
        added = [  # a function or descriptor: it shadows (copyreg's __slotnames__ does not)
            n
            for n in set(vars(cls)) - names
            if hasattr(vars(cls)[n], "__get__") and not _torch_code(vars(cls)[n])
        ]
        out += [f"{cls.__qualname__}.{name}" for name in added]
    functions, dispatch = (now - was for now, was in zip(_modes(), before["modes"]))
    if functions:
        out.append(f"the torch function modes (__torch_function__: {functions:+d})")
    if dispatch:
        out.append(f"the torch dispatch modes (__torch_dispatch__: {dispatch:+d})")
    return sorted(out)


def shadowed_on_tensors() -> list[str]:
    """Tensor methods a tensor object has a function of its own for (`param.detach = ...`
    makes the harness read what the function returns): every live tensor, found by gc."""
    found, is_tensor = set(), {}
    for thing in gc.get_objects():
        kind = type(
            thing
        )  # not isinstance: some objects of torch warn when asked their class
        if kind not in is_tensor:
            is_tensor[kind] = issubclass(kind, torch.Tensor)
        if is_tensor[kind]:
            own = getattr(thing, "__dict__", None) or {}
            found |= {
                f"a tensor's own {name}"
                for name, value in own.items()
                if callable(value) and callable(getattr(torch.Tensor, name, None))
            }
    return sorted(found)


def check(before: dict | None, collectives: bool = True, tensors: bool = False) -> None:
    """Raise TamperError naming what the student's code replaced since `before` (with
    `tensors`, the methods it shadowed on tensor objects too: a slower search)."""
    if before is None:
        return
    found = changed(before, collectives) + (shadowed_on_tensors() if tensors else [])
    if found:
        shown = ", ".join(found[:6]) + (
            f" and {len(found) - 6} more" if len(found) > 6 else ""
        )
        raise TamperError(
            f"tampering: the student's code replaced {shown}, which the grader measures with"
        )
