"""What a graded student file may use: an allow-list per lab, read before the file runs.

    rules = policy.RULES["ddp"]           # the modules and names the DDP lab's file may use
    policy.check(source, "ddp")           # [(line, what, why)]: empty for an honest file

The file may import the modules its lab lists and, from each, the names it lists (a module
given as "*" offers every public name that is not a module, less what DENIED keeps: torch's
tensor API, say). Everything else is refused by name, before a line runs: the grader, the
course's own code, Python's machinery (sys, os, gc, inspect, importlib, threading, copyreg,
ctypes, __main__, ...), PyTorch's implementations of what the labs grade (DDP, FSDP1) and its
ways around the metered path (stores, raw process groups). Names and attributes that start
with "_" are a library's inside: refused, but for the file's own (a `_helper`, `self._cache`)
and `super().__init__()`. So are the builtins that reach around these rules (getattr, exec,
open, ...) and the attributes that reach a frame or code object (RestrictedPython's list).

RestrictedPython was evaluated first: its default policy refuses 7 of the 10 reference
solutions (augmented assignment to attributes and items: `self.bucket_bytes += n`), and its
runtime guards would route every attribute access through a function of ours; the allow-list
the labs need is of modules and names, which it leaves to the host. The rules here are read
from the file's syntax tree (this module) and kept while it runs (zerobook.trust.restricted:
module views, the builtins, the importer), so an alias (`d = dist; d.TCPStore`) is refused
too, when it is used.
"""

from __future__ import annotations

import ast
import string
from dataclasses import dataclass

# names Python's syntax uses that are not a library's inside
OWN_DUNDERS = {"__name__", "__init__"}
# builtins that reach around the rules: by name, by text, or into the process
# (getattr, setattr, delattr and hasattr are given guarded: zerobook.trust.restricted)
REFUSED_BUILTINS = {
    "__import__", "breakpoint", "compile", "dir", "eval", "exec", "exit", "globals",
    "help", "input", "locals", "memoryview", "open", "quit", "vars",
}  # fmt: skip
# attributes that reach a frame, code or traceback (RestrictedPython's INSPECT_ATTRIBUTES, with
# the generator's and coroutine's frames), text looked up as attributes (str.format's fields),
# or a file's bytes (a storage's from_file)
REFUSED_ATTRIBUTES = {
    "ag_await", "ag_code", "ag_frame", "co_code", "cr_await", "cr_code", "cr_frame",
    "cr_origin", "f_back", "f_builtins", "f_code", "f_globals", "f_locals", "f_trace",
    "gi_code", "gi_frame", "gi_yieldfrom", "tb_frame", "tb_next", "format_map",
    "from_file",
}  # fmt: skip

DIST_BASE = {"get_rank", "get_world_size", "ReduceOp", "barrier", "is_initialized"}
P2P = {"send", "recv", "isend", "irecv", "P2POp", "batch_isend_irecv"}
COLLECTIVES = {
    "all_reduce", "broadcast", "reduce_scatter_tensor", "all_gather_into_tensor",
    "all_gather", "reduce_scatter", "reduce", "gather", "scatter", "all_gather_object",
    "broadcast_object_list", "all_to_all_single",
}  # fmt: skip
# what every lab's file may use ("*": every public name but modules and DENIED's)
COMMON = {
    "torch": "*",
    "torch.nn": "*",
    "torch.nn.functional": "*",
    "torch.optim": "*",
    "torch.linalg": "*",
    "torch.autograd": "*",
    "torch.distributed": DIST_BASE | COLLECTIVES | P2P,
    "math": "*",
    "itertools": "*",
    "functools": "*",
    "collections": "*",
    "dataclasses": "*",
    "typing": "*",
}
# of a "*" module, what reaches beyond the rank's own tensors or changes torch for the grader
DENIED = {
    "torch": {
        "from_file", "compile", "export", "set_default_dtype", "set_default_device",
        "set_default_tensor_type", "set_flush_denormal", "use_deterministic_algorithms",
        "set_deterministic_debug_mode", "set_float32_matmul_precision", "set_num_threads",
        "set_num_interop_threads", "set_warn_always", "set_rng_state", "set_vital",
        "set_anomaly_enabled", "DisableTorchFunction", "DisableTorchFunctionSubclass",
    },
    "torch.nn": {"DataParallel"},
}  # fmt: skip
# lab -> its file's modules and names (the labs grade the idea these would hand over)
RULES = {
    "setup_check": COMMON | {"socket": {"gethostname"}},
    "memory": COMMON,
    "ddp": COMMON,
    "ring_allreduce": COMMON | {"torch.distributed": DIST_BASE | P2P},
    "zero": COMMON,
    "zero3": COMMON,
    "capstone": COMMON,
    "bug_zoo": COMMON,
    "zeropp": COMMON | {"torch.distributed": DIST_BASE | COLLECTIVES | P2P | {"new_group"}},
    "fsdp2": COMMON
    | {
        "torch.distributed.fsdp": {"fully_shard", "MixedPrecisionPolicy", "FSDPModule"},
        "torch.distributed.checkpoint": {"save", "load", "state_dict"},
        "torch.distributed.checkpoint.state_dict": {
            "get_state_dict", "set_state_dict", "StateDictOptions",
        },
    },
}  # fmt: skip


@dataclass(frozen=True)
class Violation:
    line: int
    code: str
    why: str

    def __str__(self) -> str:
        return f"line {self.line}: `{self.code}`: {self.why}"


def allows(lab: str, module: str, name: str | None = None) -> bool:
    """Whether lab `lab`'s file may import `module` (name None) or use its `name`."""
    given = RULES[lab].get(module)
    if given is None or name is None:
        return given is not None
    if name.startswith("_"):
        return False
    if given == "*":
        return name not in DENIED.get(module, ())
    return name in given


def modules_text(lab: str) -> str:
    """The modules lab `lab`'s file may import, for its messages and its notebook's header."""
    return ", ".join(sorted(RULES[lab]))


def rules_text(lab: str) -> str:
    """The rules, as each lab's notebook tells them before the student writes a line."""
    dist = RULES[lab]["torch.distributed"]
    groups = [("the collectives", COLLECTIVES), ("send and receive", P2P)]
    offered = [words for words, names in groups if names <= dist]
    whole = set().union(*(names for _, names in groups if names <= dist))
    offered += [f"`{n}`" for n in sorted(dist - DIST_BASE - whole)]
    modules = ", ".join(f"`{m}`" for m in sorted(RULES[lab]))
    return (
        "**The rules for your file.** The grader imports it under an allow-list. It may "
        f"import {modules}. Of `torch.distributed` it may use {', '.join(offered)}, "
        "`get_rank` and `get_world_size`. Anything else is refused before your file runs, "
        "naming the line, and every part scores 0: another module, a name or attribute "
        "that starts with `_` (your own excepted), `eval`, `exec`, `open`, a frame."
    )


def check(source: str, lab: str, filename: str = "<student>") -> list[Violation]:
    """Each use of `source` that lab `lab`'s rules refuse, with its line (a SyntaxError as
    Python gives it)."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    bound = imported_modules(tree, lab)
    found = []
    for node in ast.walk(tree):
        for why in _problems(node, lab) + _chain_problems(node, lab, bound):
            code = lines[node.lineno - 1].strip() if node.lineno <= len(lines) else ""
            found.append(Violation(node.lineno, code[:120], why))
    return sorted(set(found), key=lambda v: v.line)


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


def _problems(node, lab: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [
            _module_problem(lab, a.name) for a in node.names if not allows(lab, a.name)
        ]
    if isinstance(node, ast.ImportFrom):
        return _from_problems(node, lab)
    if isinstance(node, ast.Name):
        return _name_problems(node.id)
    if isinstance(node, ast.Attribute):
        return _attribute_problems(node)
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


def _name_problems(name: str) -> list[str]:
    if name in REFUSED_BUILTINS:
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
    if attr == "__init__" and _is_super_call(owner):
        return []
    if not attr.startswith("__") and isinstance(owner, ast.Name) and owner.id == "self":
        return []  # the file's own object
    return [f".{attr} is a library's or the grader's inside: use public names only"]


def _is_super_call(node) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "super"
    )


def _safe_format(owner) -> bool:
    """A literal string whose fields name no attribute or item ("{0.__class__}" would)."""
    if not (isinstance(owner, ast.Constant) and isinstance(owner.value, str)):
        return False
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(owner.value) if f]
    except ValueError:
        return False
    return all("." not in f and "[" not in f for f in fields)
