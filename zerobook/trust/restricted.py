"""A graded student file run under its lab's rules (zerobook.trust.policy) as it runs, not only
as it reads: `load` checks the text, then executes it as a module whose builtins are the
allowed ones and whose `import` hands out views, not modules.

    module = restricted.load("ddp_student.py", "student", "ddp")   # PolicyViolation if refused

A view shows the names of one module that the lab allows, looked up when used (a harness that
meters `dist.all_reduce` is what the student's call reaches); it has no other attribute and takes
none, so the file can neither reach the real module (`sys.modules`, `__main__` and the grader
are not among its names) nor stash anything on it. A submodule is a view too, where the lab
allows it; `torch.load` reads tensors only (weights_only: a pickle could import any module)
and objects go between ranks as JSON (zerobook.trust.plain_objects).
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import sys
import types
import weakref
from pathlib import Path

from zerobook.trust import policy, policy_text
from zerobook.trust.policy import PolicyViolation


def guarded(function, what: str, made=None):
    """getattr, setattr, delattr, hasattr as the file may call them: not for a name the rules
    keep (an inside, a frame's, a format's), whatever text builds it; setattr and delattr (given
    `made`, the file's classes) on what `writable` allows only."""

    def checked(owner, name, *rest):
        if not isinstance(name, str) or name.startswith("_") or name in REFUSED:
            raise PolicyViolation(
                f"{what}(..., {name!r}): not a name your file may use"
            )
        if made is not None:
            writable(owner, made, name)
        return function(owner, name, *rest)

    return checked


# what the whole process shares: its attributes are not the file's to change
SHARED = (
    type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
    types.MethodWrapperType, types.WrapperDescriptorType, types.MethodDescriptorType,
    functools.partial, property, staticmethod, classmethod,
)  # fmt: skip


def writable(thing, made, name: str = ""):
    """`thing`, where the file may change its attribute `name`: an object, or a class the file
    made; not another class, a module, a function or an object a library keeps as a global
    (torch.nn.Module.kept = {} would keep state for the whole process, where a second import
    finds it and no walk of the file's looks); nor, on an object, a method of a library's
    class (`param.abs = ...` would answer for what the grader measures with)."""
    shared = isinstance(thing, SHARED) or id(thing) in _GLOBALS
    if shared and not (isinstance(thing, type) and thing in made):
        raise PolicyViolation(
            f"changes an attribute of {what_it_is(thing)}, which the whole process shares: "
            "keep your state in your own objects"
        )
    if not shared and shadows(thing, name, made):
        raise PolicyViolation(
            f"replaces the method {name} on a {type(thing).__name__}, which the grader "
            "calls too: keep your functions in your own objects"
        )
    return thing


def shadows(thing, name: str, made) -> bool:
    """Whether `thing.name = ...` would hide a method of a class the file did not make (of
    torch.Tensor, for any tensor: a subclass of the file's is a tensor still)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(thing, torch.Tensor):
        classes = torch.Tensor.__mro__
    else:
        classes = [c for c in type(thing).__mro__ if c not in made]
    return any(callable(vars(c).get(name)) for c in classes)


def what_it_is(thing) -> str:
    if isinstance(thing, type):
        return f"the class {thing.__name__}"
    if isinstance(thing, types.ModuleType):
        return "a module"
    if isinstance(thing, SHARED):
        return f"the function {getattr(thing, '__name__', '?')}"
    return f"a library's {type(thing).__name__}"


def one_argument_type(*args):
    """type(x); not type(name, bases, dict), which writes any name into a class."""
    if len(args) != 1:
        raise PolicyViolation("type() with a dict of attributes: write a class instead")
    return type(args[0])


REFUSED = policy.REFUSED_ATTRIBUTES | {"format"}
# the builtins the file may use: an allow-list (site's license() reads any file, a red team
# found); getattr and its kin, guarded, and type, with one argument, are added in run()
SAFE_BUILTINS = {
    name: getattr(builtins, name)
    for name in """abs all any ascii bin bool bytearray bytes callable chr classmethod
    complex dict divmod enumerate filter float format frozenset hash hex id int isinstance
    issubclass iter len list map max min next object oct ord pow print property range repr
    reversed round set slice sorted staticmethod str sum super tuple zip Ellipsis
    NotImplemented""".split()
}
SAFE_BUILTINS |= {  # every exception class, to raise and to catch
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # view -> (lab, module)
_GLOBALS: set = (
    set()
)  # id() of every object a view handed out: libraries' globals, which live on


class View(types.ModuleType):
    """What the student's file holds for an allowed module: its allowed names, read-only. A
    module to the harness's walkers (which skip modules); its own name is not the module's, so
    that Python's `from x import y` never falls back to the real module in sys.modules. Its
    lab and module are kept here, not on it, and only `view()` makes one: a subclass, or a
    view made some other way, has no rules to answer by."""

    def __init_subclass__(cls, **kwargs):
        raise PolicyViolation("a module view is made by the grader's import only")

    def __getattr__(self, name: str):
        if name.startswith("_"):  # Python's and the harness's probes (__file__, ...)
            raise AttributeError(name)
        if self not in _VIEWS:
            raise PolicyViolation("a module view is made by the grader's import only")
        lab, module = _VIEWS[self]
        real_module = importlib.import_module(module)
        real = getattr(real_module, name)
        full = f"{module}.{name}"
        if isinstance(real, types.ModuleType):
            if policy.allows(lab, full):
                return view(lab, full)
            raise PolicyViolation(
                f"{full} is not a module this lab's file may use (it may import "
                f"{policy.modules_text(lab)})"
            )
        if not policy.allows(lab, module, name):
            raise PolicyViolation(f"{full} is not a name this lab's file may use")
        if vars(real_module).get(name) is real:  # kept there, so its id stays its own
            _GLOBALS.add(id(real))  # a library's global: the process's, not the file's
        from zerobook.trust.plain_objects import WRAPPED  # the same call, made safe

        return WRAPPED.get(full, lambda real: real)(real)

    def __setattr__(self, name, value):
        raise PolicyViolation(
            "a module is the grader's too: your file may not change it"
        )

    __delattr__ = __setattr__

    def __dir__(self):
        lab, module = _VIEWS.get(self, (None, None))
        if lab is None:
            return []
        names = dir(importlib.import_module(module))
        return [n for n in names if policy.allows(lab, module, n)]

    def __repr__(self) -> str:
        return f"<module {_VIEWS.get(self, ('', '?'))[1]!r}, as this lab's file may use it>"


def view(lab: str, module: str) -> View:
    made = View(f"<{module}>")
    _VIEWS[made] = (str(lab), str(module))
    return made


def importer(lab: str):
    """The file's `__import__`: the lab's modules as views (a dotted import binds the
    top-level package's view, as Python's own does), anything else refused."""

    def restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
        if isinstance(fromlist, list):
            # C code's PyImport_Import while the file's frame runs (torch.tensor imports
            # torch.storage so): it passes a list, which no import statement compiles to,
            # and reads sys.modules, not what this returns
            return importlib.import_module(name)
        if level:
            raise PolicyViolation("a relative import: import the lab's modules by name")
        if not policy.allows(lab, name):
            raise PolicyViolation(
                f"{name} is not a module this lab's file may import (it may import "
                f"{policy.modules_text(lab)})"
            )
        importlib.import_module(name)
        top = name if fromlist else name.partition(".")[0]
        if not policy.allows(lab, top):
            raise PolicyViolation(f"import {name} binds {top}: write `from ... import`")
        return view(lab, top)

    return restricted_import


def load(path, name: str, lab: str) -> types.ModuleType:
    """The student's file at `path` run as module `name` under lab `lab`'s rules (its text
    checked first: PolicyViolation names every line the rules refuse)."""
    path = Path(path).resolve()
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    run(path.read_text(), str(path), lab, vars(module))
    return module


def run(source: str, filename: str, lab: str, namespace: dict) -> dict:
    """`source` checked, then executed in `namespace` under lab `lab`'s rules: its builtins
    the allowed ones, its imports views (a graded notebook's functions run so too, by the
    function server: zerobook.classroom.function_server)."""
    refused = policy_text.check(source, lab, filename)
    if refused:
        raise PolicyViolation(
            f"{Path(filename).name} uses what this lab's rules do not allow (every part "
            "scores 0): "
            + "; ".join(map(str, refused))
            + f" (this lab's file may import {policy.modules_text(lab)})"
        )
    made = weakref.WeakSet()  # the classes the file's class statements made
    namespace["__builtins__"] = dict(
        SAFE_BUILTINS,
        getattr=guarded(getattr, "getattr"),
        setattr=guarded(setattr, "setattr", made),
        delattr=guarded(delattr, "delattr", made),
        hasattr=guarded(hasattr, "hasattr"),
        type=one_argument_type,
        __build_class__=lambda *a, **k: keep(builtins.__build_class__(*a, **k), made),
        __import__=importer(lab),
        __name__=namespace.get("__name__", "__main__"),
        __own__=lambda thing: own(thing, made),
        __writable__=lambda thing, name: writable(thing, made, name),
    )
    tree = OwnAttributes().visit(ast.parse(source, filename))
    exec(compile(ast.fix_missing_locations(tree), filename, "exec"), namespace)
    return namespace


def keep(cls, made):
    made.add(cls)
    return cls


def own(thing, made):
    """`thing`, where it is an object of a class the file made (`self._x` is the file's own
    attribute then, not a library's inside); PolicyViolation otherwise."""
    if any(cls in made for cls in type(thing).__mro__):
        return thing
    raise PolicyViolation(
        f"self._...: self is a {type(thing).__name__}, not an object of a class your file "
        "made; a library's inside is not your file's"
    )


class OwnAttributes(ast.NodeTransformer):
    """`self._x` compiled as `__own__(self)._x`: checked when used (a name bound to any
    object may be called self, and a method called with any object as self); `x.a = v` (and
    `del x.a`, `x.a += v`) as `__writable__(x, "a").a = v`: checked when it runs."""

    def visit_Attribute(self, node):
        self.generic_visit(node)
        named = isinstance(node.value, ast.Name) and node.value.id == "self"
        if named and node.attr.startswith("_") and not node.attr.startswith("__"):
            node.value = self.call("__own__", node.value)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            node.value = self.call("__writable__", node.value, node.attr)
        return node

    @staticmethod
    def call(name: str, value, *names: str):
        args = [value, *(ast.Constant(n) for n in names)]
        return ast.copy_location(ast.Call(ast.Name(name, ast.Load()), args, []), value)
