"""The static review's reading of one piece of the student's code (ast; it is never run): each
construct of zerobook.classroom.review_rules it uses, on which line, and why that matters.

`constructs(tree, names)` -> [(line, code, why)].
"""

from __future__ import annotations

import ast
import builtins
import re
from fnmatch import fnmatchcase

from zerobook.classroom.review_rules import ATTRIBUTES, BUILTINS, MODULE_FILES, STRINGS

SAME_PROCESS = "changes it for the grader's code too (it runs in the same process)"
ENVIRON = (
    "reads the environment beyond a named variable (the grader's settings are there)"
)
# what may be asked of os.environ by a name written in the code
ENVIRON_BY_NAME = {"os.environ", "os.environ.get", "os.getenv"}
Found = tuple[int, str, str]  # line, the code, why


# tensor methods the harnesses measure with: `param.abs = ...` would answer for them
MEASURED = {
    "abs", "max", "min", "item", "sum", "equal", "detach", "clone", "sub", "eq", "ne",
    "allclose", "numel", "tolist", "float", "to", "cpu", "reshape", "view", "flatten",
    "untyped_storage", "data_ptr", "nbytes", "element_size", "copy_", "__sub__", "__eq__",
}  # fmt: skip


def matching(name: str, patterns: dict[str, str]) -> str | None:
    """Why `name` is flagged: the first pattern that names it or a module above it."""
    for pattern, why in patterns.items():
        if fnmatchcase(name, pattern) or fnmatchcase(name, pattern + ".*"):
            return why
    return None


def literal(node) -> str | None:
    return (
        node.value
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        else None
    )


def shown(node) -> str:
    """The code of `node` on one line, cut to 60 characters."""
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= 60 else text[:57] + "..."


class Reader:
    """One walk over a tree; `found` collects what it uses."""

    def __init__(self, tree: ast.AST, names: dict[str, str]):
        self.tree, self.names, self.found = tree, names, []
        self.parent = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        self.own = {"self", "cls"} | {
            n.name for n in ast.walk(tree) if isinstance(n, defs)
        }
        stored = (ast.Store, ast.Del)
        self.bound = self.own | {
            n.id if isinstance(n, ast.Name) else n.arg
            for n in ast.walk(tree)
            if isinstance(n, ast.arg)
            or (isinstance(n, ast.Name) and isinstance(n.ctx, stored))
        }
        self.aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:  # import a.b: a; import a.b as c: c is a.b
                    top = a.name.split(".")[0]
                    self.aliases[a.asname or top] = a.name if a.asname else top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        self.bound |= set(self.aliases)
        # x = torch.Tensor; y = x: names that stand for what was imported
        for _ in range(3):
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target, value = node.targets[0], self.qual(node.value)
                    if isinstance(target, ast.Name) and value:
                        self.aliases[target.id] = value

    def builtin(self, node, *names) -> bool:
        return (
            isinstance(node, ast.Name)
            and node.id in names
            and node.id not in self.bound
        )

    def qual(self, node) -> str | None:
        """What `node` stands for, by the name it was imported under; None if not imported."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qual(node.value)
            return base and f"{base}.{node.attr}"
        if isinstance(node, ast.Call) and node.args:
            first = literal(node.args[0])
            if (
                self.builtin(node.func, "getattr")
                and len(node.args) > 1
                and literal(node.args[1])
            ):
                base = self.qual(node.args[0])
                return base and f"{base}.{literal(node.args[1])}"
            if first and self.qual(node.func) == "importlib.import_module":
                return first
            if first and self.builtin(node.func, "__import__"):
                return first.split(".")[0]
        return None

    def add(self, node, why: str, code: str | None = None) -> None:
        self.found.append((node.lineno, code or shown(node), why))

    def run(self) -> list[Found]:
        for node in ast.walk(self.tree):
            kind = type(node).__name__
            visit = getattr(self, f"visit_{kind}", None)
            if visit:
                visit(node)
            if isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
                self.chain(node)
        return self.found

    def visit_FunctionDef(self, node) -> None:
        """A top-level function named like a builtin replaces it in the notebook's namespace."""
        if node.col_offset == 0 and node.name in vars(builtins):
            why = f"a function named like Python's own {node.name}: it replaces the builtin"
            self.add(
                node, why + " for the tests that share the notebook", f"def {node.name}"
            )

    def visit_Import(self, node) -> None:
        for alias in node.names:
            self.imported(node, alias.name)

    def visit_ImportFrom(self, node) -> None:
        for alias in node.names if node.module and not node.level else ():
            code = f"from {node.module} import {alias.name}"
            self.imported(node, f"{node.module}.{alias.name}", code)

    def imported(self, node, name: str, code: str | None = None) -> None:
        why = matching(name, self.names)
        if why:
            self.add(node, why, code or f"import {name}")

    def chain(self, node) -> None:
        """A name reached through what was imported, read where its chain ends."""
        parent = self.parent.get(node)
        extends = isinstance(parent, ast.Attribute) or (
            isinstance(parent, ast.Call)
            and parent.args[:1] == [node]
            and self.builtin(parent.func, "getattr")
            and self.qual(parent)
        )
        if extends or isinstance(getattr(node, "ctx", None), ast.Store):
            return
        name = self.qual(node)
        if not name:
            return
        if name in ENVIRON_BY_NAME or name.startswith("os.environ."):
            self.environ(node, name, parent)
        elif why := matching(name, self.names):
            self.add(node, why, shown(node))

    def environ(self, node, name: str, parent) -> None:
        """os.environ["RANK"] and os.environ.get("RANK") are fine; a walk over all of it is not."""
        call = isinstance(parent, ast.Call) and parent.func is node
        by_name = (
            (isinstance(parent, ast.Subscript) and literal(parent.slice))
            or (call and parent.args and literal(parent.args[0]))
            or (isinstance(parent, ast.Compare) and literal(parent.left))
        )
        if name not in ENVIRON_BY_NAME or not by_name:
            self.add(node, ENVIRON)

    def visit_Attribute(self, node) -> None:
        attr, base = node.attr, node.value
        mine = self.mine(base)
        if attr in ATTRIBUTES and not mine:
            self.add(node, ATTRIBUTES[attr])
        elif attr in MODULE_FILES and self.qual(base):
            self.add(node, "finds where an imported module's files are on disk")
        elif attr == "__dict__" and not mine:
            self.add(
                node, "reads or changes the attributes of an object it does not own"
            )
        elif isinstance(node.ctx, ast.Store) and attr.startswith("__") and not mine:
            self.add(node, "changes what an object it does not own is")

    def mine(self, node) -> bool:
        """Whether `node` is the student's own: self, cls, super(), type(self), their classes."""
        if isinstance(node, ast.Call) and self.builtin(node.func, "type"):
            node = node.args[0] if node.args else node
        if isinstance(node, ast.Call):
            return self.builtin(node.func, "super")
        return isinstance(node, ast.Name) and node.id in self.own

    def visit_Call(self, node) -> None:
        func, args = node.func, node.args
        by_module = self.qual(func) == "importlib.import_module"
        if self.builtin(func, *BUILTINS):
            self.add(node, BUILTINS[func.id], f"{func.id}(...)")
        if (
            (by_module or self.builtin(func, "__import__"))
            and args
            and literal(args[0])
        ):
            self.imported(node, literal(args[0]))  # import_module("x") imports x
        elif by_module:
            self.add(node, "imports a module by a name built at run time")
        if (
            self.builtin(func, "getattr", "setattr", "delattr", "hasattr")
            and len(args) > 1
        ):
            self.attribute_by_name(node, func.id, args[0], args[1])
        elif self.builtin(func, "vars") and args and not self.mine(args[0]):
            self.add(
                node, "reads or changes the attributes of an object it does not own"
            )

    def attribute_by_name(self, node, how: str, owner, name) -> None:
        text, target = literal(name), self.qual(owner)
        if text in ATTRIBUTES:
            self.add(node, ATTRIBUTES[text])
        if how in ("setattr", "delattr") and target:
            self.add(node, f"{how} on {target}: {SAME_PROCESS}")
        elif text is None and target:
            self.add(node, f"reaches a name of {target} chosen at run time")
        elif text is None and how != "hasattr" and not self.mine(owner):
            self.add(node, "reaches an attribute whose name is built at run time")

    def visit_Assign(self, node) -> None:
        for target in node.targets:
            self.assigned(target)

    def visit_AugAssign(self, node) -> None:
        self.assigned(node.target)

    visit_AnnAssign = visit_AugAssign
    visit_For = visit_AugAssign

    def visit_Delete(self, node) -> None:
        for target in node.targets:
            self.assigned(target)

    def assigned(self, target) -> None:
        """Writing into an imported module, class or object changes it for the grader too."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.assigned(element)
        elif isinstance(target, ast.Starred):
            self.assigned(target.value)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            if getattr(target, "attr", None) in MEASURED and not self.mine(
                target.value
            ):
                why = "shadows a tensor method on one object: the grader's measurements call it"
                self.add(target, why, f"{shown(target)} = ...")
            name = self.qual(target.value)
            if name and not matching(name, self.names):  # else flagged as what it is
                why = f"writes into {name}: {SAME_PROCESS}"
                self.add(target, why, f"{shown(target)} = ...")

    def visit_Constant(self, node) -> None:
        inside = (ast.Expr, ast.JoinedStr)  # a docstring; a part of an f-string
        if isinstance(node.value, str) and not isinstance(
            self.parent.get(node), inside
        ):
            self.text(node, node.value)

    def visit_JoinedStr(self, node) -> None:
        parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
        self.text(node, "".join(map(str, parts)))

    def text(self, node, text: str) -> None:
        for pattern, why in STRINGS.items():
            if re.search(pattern, text):
                self.add(node, why)


def constructs(tree: ast.AST, names: dict[str, str]) -> list[Found]:
    """What `tree` uses of `names` (qualified name pattern -> why) and of the rules every lab
    shares, each with its line."""
    return Reader(tree, names).run()
