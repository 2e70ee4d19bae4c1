"""Where a student's file can keep tensors besides its object: what a lab counts as held.

    roots(student_module, model)   # a list to walk with the lab's own tensor walker

A ZeRO lab grades the bytes a rank holds. Counting only what the student's object reaches
(its attributes, lists, dicts) misses a file that keeps every gradient in a module-level list,
or a full copy of every unit in a dict that a hook closes over. `roots` adds what the file
itself holds: its module's globals, its classes' own attributes, and the cells and defaults of
every function its code defined, wherever the function is kept (the module, a class, or a hook
registered on the model's parameters or modules). Modules, classes and functions are not
walked further by the labs' walkers; their contents are handed over here as plain values.
"""

from __future__ import annotations

import types

HOOKS = (
    "_post_accumulate_grad_hooks",
    "_backward_hooks",
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_load_state_dict_pre_hooks",
)


def _theirs(function, file: str) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and code.co_filename == file


def _function_values(function) -> list:
    """What a function keeps: its closure's cells, its defaults, a bound method's object."""
    bound = [function.__self__] if isinstance(function, types.MethodType) else []
    function = getattr(function, "__func__", function)
    cells = [c.cell_contents for c in (function.__closure__ or ()) if _filled(c)]
    kw = list((function.__kwdefaults__ or {}).values())
    return bound + cells + list(function.__defaults__ or ()) + kw


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True


def _hooks(model) -> list:
    """Every hook registered on `model`'s modules and parameters."""
    owners = [*model.modules(), *model.parameters()] if model is not None else []
    found = []
    for owner in owners:
        for name in HOOKS:
            found += list((getattr(owner, name, None) or {}).values())
    return found


def roots(module, model=None) -> list:
    """The values a student's `module` holds outside its objects (see above)."""
    file = getattr(module, "__file__", None)
    out, seen = [], set()
    # (its builtins are the grader's: zerobook.trust.restricted)
    todo = [v for k, v in vars(module).items() if k != "__builtins__"] + _hooks(model)
    while todo:
        value = todo.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, types.ModuleType):
            continue
        if isinstance(value, type):
            if value.__module__ == module.__name__:  # a class of theirs: its attributes
                todo += list(vars(value).values())
        elif isinstance(value, (staticmethod, classmethod)):
            todo.append(value.__func__)
        elif _theirs(getattr(value, "__func__", value), file):
            todo += _function_values(value)
        elif not callable(value):
            out.append(value)
    return out
