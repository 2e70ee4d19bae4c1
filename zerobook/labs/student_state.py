"""Every tensor a student's code holds: what the ZeRO labs count as held.

    tensors([zero], student_module, model)               # Lab 4: at each gradient's hook
    tensors([zero], student_module, model, grads=True)   # Lab 5, the capstone: after step()

The walk starts from the student's object, its file's globals (its module) and every hook its
code registered on the model's modules and parameters. It follows every reference Python keeps
(gc.get_referents: an object's attributes and slots, a container's items, an iterator's
sequence, a generator's suspended locals, a partial's arguments, a cell's contents), into the
file's own functions (their closures and defaults, wherever one is kept: an attribute, a deque,
a hook) and classes, and through autograd (a tensor's grad_fn and the tensors its graph saved).
It stops at modules, at classes and functions that are not the file's (the grader's hooks on
the model are the grader's) and at a collective's handle (its output only). The caller leaves
out the model's parameters and buffers and the optimizer's state, by storage. The file can
keep nothing anywhere else: not on a class, a module or a function (zerobook.trust.restricted),
not outside torch (numpy, ctypes and files are not among what its rules allow).
"""

from __future__ import annotations

import gc
import types

import torch

from zerobook.train import measure

HOOKS = (
    "_post_accumulate_grad_hooks",
    "_backward_hooks",
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_load_state_dict_pre_hooks",
)
FUNCTIONS = (types.FunctionType, types.MethodType)


def tensors(things, module, model=None, grads=False, limit=50_000) -> list:
    """Every tensor `things`, `module` (the student's file) and its hooks on `model` hold, as
    torch's own Tensor (measure.plain); with `grads`, each one's .grad too."""
    from zerobook.data_parallel.inflight import Handle

    file, name = getattr(module, "__file__", None), getattr(module, "__name__", None)
    # (its builtins are the grader's: zerobook.trust.restricted)
    todo = [v for k, v in vars(module).items() if k != "__builtins__"]
    todo += list(things) + _hooks(model)
    found, seen = [], set()
    while todo and len(seen) < limit:
        thing = todo.pop()
        if id(thing) in seen or isinstance(thing, types.ModuleType):
            continue
        seen.add(id(thing))
        if isinstance(thing, torch.Tensor):
            plain = measure.plain(thing)  # a subclass's own account of itself set aside
            found += [plain] + (
                [plain.grad] if grads and plain.grad is not None else []
            )
            todo += list(getattr(thing, "__dict__", {}).values())  # param.kept = ...
            todo.append(thing.grad_fn)
        elif isinstance(thing, Handle):
            found.append(thing.tensor)
        elif isinstance(thing, type):
            if thing.__module__ == name:  # a class of theirs: its attributes
                todo += list(vars(thing).values())
        elif isinstance(thing, FUNCTIONS):
            if _theirs(thing, file):
                todo += _function_values(thing)
        elif isinstance(thing, torch.autograd.graph.Node):
            todo += _saved(thing)
        else:
            todo += gc.get_referents(thing)
    return found


def _theirs(function, file: str | None) -> bool:
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    return file is not None and code is not None and code.co_filename == file


def _function_values(function) -> list:
    """What a function keeps: its closure's cells, its defaults, a bound method's object."""
    bound = [function.__self__] if isinstance(function, types.MethodType) else []
    function = getattr(function, "__func__", function)
    cells = list(function.__closure__ or ())
    kw = list((function.__kwdefaults__ or {}).values())
    return bound + cells + list(function.__defaults__ or ()) + kw


def _saved(node) -> list:
    """What an autograd node keeps: the tensors it saved for backward (while not freed), the
    leaf it accumulates into, the nodes it leads to."""
    out = [getattr(node, "variable", None)]
    for attribute in dir(node):
        if attribute.startswith("_saved_"):
            try:
                out.append(getattr(node, attribute))
            except RuntimeError:  # freed by a backward
                pass
    return out + [f for f, _ in node.next_functions]


def _hooks(model) -> list:
    """Every hook registered on `model`'s modules and parameters."""
    owners = [*model.modules(), *model.parameters()] if model is not None else []
    found = []
    for owner in owners:
        for name in HOOKS:
            found += list((getattr(owner, name, None) or {}).values())
    return found
