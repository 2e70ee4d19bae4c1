"""What a graded student file may use: an allow-list per lab, read before the file runs.

    rules = policy.RULES["ddp"]           # the modules and names the DDP lab's file may use
    policy.allows("ddp", "torch.distributed", "all_reduce")        # True
    policy_text.check(source, "ddp")      # [(line, what, why)]: empty for an honest file

The file may import the modules its lab lists and, from each, the names it lists (a module
given as "*" offers every public name that is not a module or a container the process shares,
less what DENIED keeps: torch's tensor API, say). Everything else is refused by name, before a line runs: the grader, the
course's own code, Python's machinery (sys, os, gc, inspect, importlib, threading, copyreg,
ctypes, __main__, ...), PyTorch's implementations of what the labs grade (DDP, FSDP1) and its
ways around the metered path (stores, raw process groups). An attribute that starts with "_"
is a library's inside: refused (but `super().__init__()` and `self._x`, which is checked when
used: `self` must be an object of a class the file made, since a name bound to anything may be
called self); a name that does, refused where it is Python's (`__x__`), the file's own
otherwise (a `_helper`). So are the builtins that reach around these rules (exec,
open, ...; the builtins are an allow-list), the attributes that reach a frame, code, numpy or
ctypes, match/case (which reads attributes by name) and type() with three arguments.
The file changes attributes of objects only, never of a class it did not make, a module or a
function (zerobook.trust.restricted): what the whole process shares is not the file's to keep
things in, where a second import would find them and no walk of its state looks.

RestrictedPython was evaluated first: its default policy refuses 7 of the 10 reference
solutions (augmented assignment to attributes and items: `self.bucket_bytes += n`), and its
runtime guards would route every attribute access through a function of ours; the allow-list
the labs need is of modules and names, which it leaves to the host. The rules here are read
from the file's syntax tree (zerobook.trust.policy_text) and kept while it runs
(zerobook.trust.restricted: module views, the builtins, the importer), so an alias
(`d = dist; d.TCPStore`) is refused too, when it is used.
"""

from __future__ import annotations


class PolicyViolation(ImportError):
    """The student's file uses what its lab's rules refuse: the part scores 0 (the run ends at
    the import, zerobook.labs.crash), the message naming each line and why."""


# names Python's syntax uses that are not a library's inside
OWN_DUNDERS = {"__name__", "__init__"}
# the special methods a file's class may define: the protocols a solution uses, none that
# Python or torch calls behind the code holding the object (pickling: a checkpoint's reader
# unpickles; finalizing; attribute lookup; __torch_function__)
OWN_METHODS = {
    "__init__", "__call__", "__len__", "__iter__", "__next__", "__getitem__", "__enter__",
    "__exit__", "__repr__", "__str__",
}  # fmt: skip
# builtins that reach around the rules: by name, by text, or into the process
# (getattr, setattr, delattr and hasattr are given guarded: zerobook.trust.restricted)
REFUSED_BUILTINS = {
    "__import__", "breakpoint", "compile", "eval", "exec", "globals", "help", "locals",
    "open", "vars",
}  # fmt: skip
# attributes that reach a frame, code or traceback (RestrictedPython's INSPECT_ATTRIBUTES, with
# the generator's and coroutine's frames), text looked up as attributes (str.format's fields),
# or a file's bytes (a storage's from_file)
# ... and what leaves torch for numpy and ctypes (raw memory, a file's bytes: a red team's)
REFUSED_ATTRIBUTES = {
    "ag_await", "ag_code", "ag_frame", "co_code", "cr_await", "cr_code", "cr_frame",
    "cr_origin", "f_back", "f_builtins", "f_code", "f_globals", "f_locals", "f_trace",
    "gi_code", "gi_frame", "gi_yieldfrom", "tb_frame", "tb_next", "format_map",
    "from_file", "numpy", "ctypes", "tofile", "dump", "dumps", "from_address",
    "from_buffer", "from_buffer_copy", "data_as",
}  # fmt: skip

DIST_BASE = {"get_rank", "get_world_size", "ReduceOp", "barrier", "is_initialized"}
P2P = {"send", "recv", "isend", "irecv", "P2POp", "batch_isend_irecv"}
COLLECTIVES = {
    "all_reduce", "broadcast", "reduce_scatter_tensor", "all_gather_into_tensor",
    "all_gather", "reduce_scatter", "reduce", "gather", "scatter", "all_gather_object",
    "broadcast_object_list", "all_to_all_single",
}  # fmt: skip
# what every lab's file may use ("*": every public name but modules and DENIED's); of the
# standard library's helpers, the names (functools.update_wrapper, typing.get_type_hints,
# dataclasses' generated code read a name as text, or evaluate text: a red team's ways out;
# lru_cache and cache keep what a function returned where no walk of the file's state looks)
COMMON = {
    "__future__": {"annotations"},
    "torch": "*",
    "torch.nn": "*",
    "torch.nn.functional": "*",
    "torch.optim": "*",
    "torch.linalg": "*",
    "torch.autograd": "*",
    "torch.distributed": DIST_BASE | COLLECTIVES | P2P,
    "math": "*",
    "itertools": "*",
    "functools": {"partial", "reduce", "total_ordering"},
    "collections": {"defaultdict", "OrderedDict", "deque", "Counter", "namedtuple"},
    "dataclasses": {"dataclass", "field", "fields", "asdict", "astuple", "replace"},
    "typing": {
        "Any", "Optional", "Union", "List", "Dict", "Tuple", "Set", "Sequence",
        "Iterable", "Iterator", "Callable", "Mapping",
    },
}  # fmt: skip
# of a "*" module, what reaches beyond the rank's own tensors or changes torch for the grader
# (and every name starting with SETTERS: torch's state, which the grader shares)
DENIED = {
    "torch": {
        "from_file", "compile", "export", "manual_seed", "seed", "DisableTorchFunction",
        "DisableTorchFunctionSubclass", "ExcludeDispatchKeyGuard", "DispatchKey",
        "DispatchKeySet", "PyTorchFileWriter", "PyTorchFileReader", "get_file_path",
        "import_ir_module", "import_ir_module_from_buffer",
    },
    "torch.nn": {"DataParallel"},
    "torch.autograd": {"detect_anomaly"},
}  # fmt: skip
SETTERS = ("set_", "use_")
# lab -> (module, name) it may use beyond the rest (Lab 8's bug is seeds that differ)
ALSO = {"bug_zoo": {("torch", "manual_seed")}}
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


def allows(lab: str, module: str, name: str | None = None) -> bool:
    """Whether lab `lab`'s file may import `module` (name None) or use its `name`."""
    given = RULES[lab].get(module)
    if given is None or name is None:
        return given is not None
    if name.startswith("_"):
        return False
    if (module, name) in ALSO.get(lab, ()):
        return True
    if given == "*":
        denied = name in DENIED.get(module, ()) or name.startswith(SETTERS)
        return not denied and not shared_state(module, name)
    return name in given


def shared_state(module: str, name: str) -> bool:
    """Whether `module.name` is a container the whole process shares (torch.linalg's
    common_notes, a dict): what the file put there would outlive it (a second import, a
    checkpoint "loaded" from memory) where no walk of its own state looks."""
    import importlib

    value = getattr(importlib.import_module(module), name, None)
    return isinstance(value, (dict, list, set, bytearray))


def modules_text(lab: str) -> str:
    """The modules lab `lab`'s file may import, for its messages and its notebook's header."""
    return ", ".join(sorted(m for m in RULES[lab] if not m.startswith("_")))


def rules_text(lab: str) -> str:
    """The rules, as each lab's notebook tells them before the student writes a line."""
    dist = RULES[lab]["torch.distributed"]
    p2p = ", ".join(f"`{n}`" for n in sorted(P2P))
    groups = [("the collectives", COLLECTIVES), (f"send and receive ({p2p})", P2P)]
    offered = [words for words, names in groups if names <= dist]
    whole = set().union(*(names for _, names in groups if names <= dist))
    offered += [f"`{n}`" for n in sorted(dist - DIST_BASE - whole)]
    modules = ", ".join(f"`{m}`" for m in modules_text(lab).split(", "))
    *rest, last = [f"`{m}`" for m in sorted(OWN_METHODS)]
    methods = f"{', '.join(rest)} and {last}"
    return (
        "**The rules for your file.** The grader imports it under an allow-list. It may "
        f"import {modules}. Of `torch.distributed` it may use {', '.join(offered)}, "
        "`get_rank` and `get_world_size`. Anything else is refused before your file runs, "
        "naming the line, and every part scores 0: another module, a name or attribute "
        "that starts with `_` (your own names and objects excepted; of the special methods "
        f"a class may define {methods}), `eval`, `exec`, `open`, a frame."
    )
