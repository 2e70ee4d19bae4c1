"""A graded file's text read under its lab's rules (zerobook.trust.policy), before a line runs:
each import, name, attribute and attribute chain from an imported module, and each annotation
written as text (a library may evaluate it), with its line.

    policy_text.check(source, "ddp")   # [Violation(line, code, why)]: empty for an honest file
"""

from __future__ import annotations

import ast
import string
from dataclasses import dataclass

from zerobook.trust.policy import (
    OWN_DUNDERS,
    OWN_METHODS,
    REFUSED_ATTRIBUTES,
    REFUSED_BUILTINS,
    allows,
)


@dataclass(frozen=True)
class Violation:
    line: int
    code: str
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: `{self.code}`: {self.why}"


def check(source: str, lab: str, filename: str = "<student>") -> list[Violation]:
    """Each use of `source` that lab `lab`'s rules refuse, with its line (a SyntaxError as
    Python gives it)."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    bound, own = imported_modules(tree, lab), names_bound(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        why = _problems(node, lab, own) + _chain_problems(node, lab, bound)
        for reason in why + _annotation_problems(node, lab, bound):
            code = lines[line - 1].strip() if 0 < line <= len(lines) else ""
            found.append(Violation(line, code[:120], reason))
    return sorted(set(found), key=lambda v: v.line)


def _annotation_problems(node, lab: str, bound: dict) -> list[str]:
    """An annotation written as text (`x: "Zero3"`) is read by the same rules: a library may
    evaluate it (a text that is no expression is refused)."""
    given = [getattr(node, "annotation", None), getattr(node, "returns", None)]
    found = []
    for text in [a.value for a in given if isinstance(a, ast.Constant)]:
        if not isinstance(text, str):
            continue
        try:
            inner = list(ast.walk(ast.parse(text.strip(), mode="eval")))
        except SyntaxError:
            found.append(f"the annotation {text!r} is not an expression")
            continue
        for part in inner:
            found += _problems(part, lab) + _chain_problems(part, lab, bound)
    return found


def imported_modules(tree, lab: str) -> dict[str, str]:
    """The names the file's imports bind to an allowed module ("dist" -> "torch.distributed")."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:  # `import a.b` binds a; `import a.b as c`, a.b
                top = a.name.partition(".")[0]
                bound[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if allows(lab, f"{node.module}.{a.name}"):
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
    return {name: module for name, module in bound.items() if allows(lab, module)}


def _chain_problems(node, lab: str, bound: dict) -> list[str]:
    """`dist.TCPStore`, `torch.nn.parallel.X`: an attribute chain from an imported module that
    leaves the lab's names (read from the text; an alias is refused when used)."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not (isinstance(node, ast.Name) and node.id in bound) or not chain:
        return []
    module = bound[node.id]
    for attr in reversed(chain):
        if allows(lab, f"{module}.{attr}"):
            module = f"{module}.{attr}"
            continue
        if _is_module(f"{module}.{attr}"):
            return [_module_problem(lab, f"{module}.{attr}")]
        if allows(lab, module, attr) or attr.startswith("_"):
            return []  # a name of the lab's; an inside is refused by its own rule
        return [f"{module}.{attr} is not a name this lab's file may use"]
    return []


def _is_module(name: str) -> bool:
    """A module, or a module one is known by (torch.os is os)."""
    import importlib.util
    import sys
    import types

    parent, _, attr = name.rpartition(".")
    if isinstance(getattr(sys.modules.get(parent), attr, None), types.ModuleType):
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def names_bound(tree) -> set[str]:
    """Every name the file binds (an `input` parameter is the file's own, not the builtin)."""
    found = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return found


def _problems(node, lab: str, own=frozenset()) -> list[str]:
    if isinstance(node, ast.Import):
        refused = [a.name for a in node.names if not allows(lab, a.name)]
        return [_module_problem(lab, name) for name in refused] + [
            why for name in _names_bound_by(node) for why in _name_problems(name)
        ]
    if isinstance(node, ast.ImportFrom):
        return _from_problems(node, lab) + [
            why for name in _names_bound_by(node) for why in _name_problems(name)
        ]
    if isinstance(node, ast.Name):
        return _name_problems(node.id, own)
    if isinstance(node, ast.Attribute):
        return _attribute_problems(node)
    if isinstance(node, ast.Match):  # `case object(__globals__=g)` reads any attribute
        return ["match/case reads attributes by name, past these rules: use if/elif"]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
        node.name.startswith("__") and node.name not in OWN_METHODS
    ):
        return [f"def {node.name}: Python or torch calls it behind the code that holds the "
                f"object; a class may define {', '.join(sorted(OWN_METHODS))}"]  # fmt: skip
    if isinstance(node, ast.Call) and _is_call_of(node, "type") and len(node.args) > 1:
        return [
            "type() with a dict of attributes writes names past these rules: use class"
        ]
    return [why for name in _names_bound_by(node) for why in _name_problems(name)]


def _names_bound_by(node) -> list[str]:
    """The names an except clause, an import's `as` or a global statement binds: none of
    them an ast.Name."""
    if isinstance(node, ast.ExceptHandler):
        return [node.name] if node.name else []
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname for a in node.names if a.asname]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    return []


def _module_problem(lab: str, module: str) -> str:
    return f"{module} is not a module this lab's file may import"


def _from_problems(node: ast.ImportFrom, lab: str) -> list[str]:
    if node.level or not node.module:
        return ["a relative import: import the lab's modules by name"]
    if not allows(lab, node.module):
        return [_module_problem(lab, node.module)]
    return [
        f"{node.module}.{a.name} is not a name this lab's file may use"
        for a in node.names
        if not (
            allows(lab, node.module, a.name) or allows(lab, f"{node.module}.{a.name}")
        )
    ]


def _name_problems(name: str, own=frozenset()) -> list[str]:
    if name in REFUSED_BUILTINS and name not in own:
        return [f"{name} reaches around the grader's rules: it is not available"]
    if name.startswith("__") and name not in OWN_DUNDERS:
        return [f"{name} is Python's machinery, not available to a graded file"]
    return []


def _attribute_problems(node: ast.Attribute) -> list[str]:
    attr, owner = node.attr, node.value
    if attr in REFUSED_ATTRIBUTES:
        return [f".{attr} reaches the interpreter's inside (a frame, code, a file)"]
    if attr == "format" and not _safe_format(owner):
        return [
            ".format() looks up attributes named in its text: use an f-string, or "
            "format a literal string whose fields are plain ({} or {0})"
        ]
    if not attr.startswith("_"):
        return []
    if attr == "__init__" and _is_call_of(owner, "super"):
        return []
    if not attr.startswith("__") and isinstance(owner, ast.Name) and owner.id == "self":
        return []  # the file's own, checked when used (zerobook.trust.restricted.own)
    return [f".{attr} is a library's or the grader's inside: use public names only"]


def _is_call_of(node, name: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == name
    )


def _safe_format(owner) -> bool:
    """A literal string whose fields name no attribute or item ("{0.__class__}" would), and
    hold no field in their format spec ("{0:{1.__globals__}}")."""
    if not (isinstance(owner, ast.Constant) and isinstance(owner.value, str)):
        return False
    try:
        parts = [(f, spec) for _, f, spec, _ in string.Formatter().parse(owner.value)]
    except ValueError:
        return False
    return all(
        "." not in (f or "") and "[" not in (f or "") and "{" not in (spec or "")
        for f, spec in parts
    )
