"""What the static review flags, and why: the constructs no honest solution needs, per lab.

A name is flagged where the student's code reaches it, as imported (`import torch.distributed as
dist` makes `dist.Reducer` torch.distributed.Reducer). A pattern names a module, a function or an
attribute, and everything under it; `*` matches any characters. Read by zerobook.classroom.review.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from zerobook._moved import MOVED

REACH = "reaches every object of the process, the grader's record among them"
IMPORTS = (
    "changes how modules are imported (the lab's import guard sits on sys.meta_path)"
)
LOADS = "loads code around the lab's import guard (a course module by its path)"
PROCESS = "starts another process, which can rewrite a rank's report after the harness checked it"
TRACE = "runs code inside every function call, the grader's too"
FRAMES = "reaches the calling frames, and the harness's variables in them"
NATIVE = "runs native code, which can rewrite the interpreter's memory"
SOURCE = "reads the source of code the student did not write"
C10D = "the process group beneath torch.distributed's API: collectives the grader does not see"
# in every lab: qualified name pattern -> why it matters
NAMES = {
    "gc.get_objects": REACH,
    "gc.get_referrers": REACH,
    "gc.get_referents": REACH,
    "sys.modules": "reaches every loaded module, the grader's and the withheld ones",
    "sys.meta_path": IMPORTS,
    "sys.path_hooks": IMPORTS,
    "sys.path_importer_cache": IMPORTS,
    "sys.path": "changes where modules are imported from",
    "sys.settrace": TRACE,
    "sys.setprofile": TRACE,
    "sys.monitoring": TRACE,
    "threading.settrace": TRACE,
    "threading.setprofile": TRACE,
    "sys.addaudithook": TRACE,
    "sys._getframe": FRAMES,
    "sys._current_frames": FRAMES,
    "inspect.currentframe": FRAMES,
    "inspect.stack": FRAMES,
    "inspect.trace": FRAMES,
    "inspect.getouterframes": FRAMES,
    "inspect.getclosurevars": "reads a function's captured variables",
    "inspect.getsource*": SOURCE,
    "inspect.getfile": SOURCE,
    "importlib.util.spec_from_*": LOADS,
    "importlib.util.module_from_spec": LOADS,
    "importlib.machinery": LOADS,
    "importlib.abc": LOADS,
    "importlib.resources": SOURCE,
    "importlib.reload": "reloads a module, undoing what the harness withheld",
    "pkgutil": LOADS,
    "zipimport": LOADS,
    "runpy": LOADS,
    "types.FunctionType": "builds a function from a code object",
    "types.CodeType": "builds code at run time",
    "types.CellType": "builds a closure cell",
    "types.ModuleType": "builds a module at run time (to run a course file in)",
    "marshal": "loads compiled code",
    "linecache": "reads the source of the cells the kernel ran, the hidden tests among them",
    "code": "runs code from text (an interactive interpreter)",
    "codeop": "compiles code from text",
    "py_compile": "compiles code from text",
    "compileall": "compiles code from text",
    "importlib._bootstrap*": LOADS,
    "importlib.util.cache_from_source": "finds a module's compiled copy (__pycache__)",
    "importlib.util.find_spec": "finds where a module's file is, to load it some other way",
    "os.fork": PROCESS,
    "os.forkpty": PROCESS,
    "os.system": PROCESS,
    "os.popen": PROCESS,
    "os.exec*": PROCESS,
    "os.spawn*": PROCESS,
    "os.posix_spawn*": PROCESS,
    "os.register_at_fork": PROCESS,
    "subprocess": PROCESS,
    "multiprocessing": PROCESS,
    "torch.multiprocessing": PROCESS,
    "concurrent.futures.ProcessPoolExecutor": PROCESS,
    "pty": PROCESS,
    "os.kill": "signals another process",
    "os.killpg": "signals a process group",
    "signal": "installs or sends signals",
    "os._exit": "leaves the process before the harness finishes the run",
    "atexit": "runs code after the harness has finished",
    "weakref.finalize": "runs code after the harness has finished",
    "ctypes": NATIVE,
    "_ctypes": NATIVE,
    "cffi": NATIVE,
    "torch.utils.cpp_extension": NATIVE,
    "torch.ops.load_library": NATIVE,
    "torch.library": "registers kernels for torch's operators, beneath the API the grader measures with",
    "torch.overrides": "intercepts torch's functions (__torch_function__), the grader's calls too",
    "torch.utils._python_dispatch": "intercepts torch's operators, the grader's calls too",
    "torch._C": "PyTorch's C bindings, beneath the API the grader records",
    "torch.distributed.distributed_c10d": C10D,
    "builtins": "changes the interpreter's builtins, for the grader's code too",
    "sqlite3": "opens a database (the gradebook is one)",
    "os.putenv": "changes the environment the grader reads its settings from",
    "os.unsetenv": "changes the environment the grader reads its settings from",
}
# calls of a builtin the student did not rebind -> why
BUILTINS = {
    "exec": "runs code from text: the course's, read from a file, runs as the student's",
    "eval": "runs code from text",
    "compile": "compiles code from text",
    "__import__": "imports by a name built at run time",
    "get_ipython": "runs code or commands from text in the kernel",
}
# an attribute of that name, on anything (reading or writing) -> why
ATTRIBUTES = {
    "__self__": "reaches the object behind a bound method (the grader's record behind "
    "dist.all_reduce)",
    "__closure__": "reads a function's captured variables (the course's code behind a "
    "withheld guard)",
    "__globals__": "reaches another module's globals",
    "__code__": "reads or swaps a function's code",
    "__func__": "reaches the function behind a bound method",
    "__wrapped__": "reaches the function behind a wrapper",
    "__defaults__": "reads or changes a function's default arguments",
    "__kwdefaults__": "reads or changes a function's default arguments",
    "__subclasses__": "walks every class loaded, the grader's among them",
    "__builtins__": "reaches the interpreter's builtins",
    "__setattr__": "sets an attribute around the class's own rules",
    "__delattr__": "removes an attribute around the class's own rules",
    "__getattribute__": "reads an attribute around the class's own rules",
    "cell_contents": "reads a closure's captured variable",
    "f_back": FRAMES,
    "f_globals": FRAMES,
    "f_locals": FRAMES,
    "f_builtins": FRAMES,
    "f_code": FRAMES,
    "tb_frame": FRAMES,
    "gi_frame": FRAMES,
    "cr_frame": FRAMES,
    "co_consts": "reads a function's compiled code",
    "co_code": "reads a function's compiled code",
    "_get_default_group": C10D,
    "allreduce": C10D,
    "allgather": C10D,
    "_allgather_base": C10D,
    "_reduce_scatter_base": C10D,
    "alltoall": C10D,
    "new_group": "makes a process group of its own, whose collectives the grader's count of "
    "the default group's does not see",
    "__reduce__": "reaches the object behind a bound method (the grader's record)",
    "__reduce_ex__": "reaches the object behind a bound method (the grader's record)",
    "_forward_hooks": "reaches the hooks registered on a module, the grader's among them",
    "_forward_pre_hooks": "reaches the hooks registered on a module, the grader's among them",
    "_backward_hooks": "reaches the hooks registered on a module, the grader's among them",
    "_backward_pre_hooks": "reaches the hooks registered on a module, the grader's among them",
    "_post_accumulate_grad_hooks": "reaches a parameter's hooks, the grader's among them",
    "register_comm_hook": "PyTorch's DDP communication hook",
    "_register_comm_hook": "PyTorch's DDP communication hook",
}
# an attribute of an imported module or class, read: where the module lives
MODULE_FILES = {"__file__", "__path__", "__spec__", "__loader__", "__cached__"}
# text in a string constant (a regex) -> why
STRINGS = {
    r"ZEROBOOK_": "names one of the grader's settings (an environment variable)",
    r"rank[^/\s]*\.json": "names a rank's report file",
    r"^/(proc|sys|dev)(/|$)": "a path into the processes' memory or the system",
    r"site-packages|(^|/)zerobook/": "a path into the installed course or libraries",
    r"(^|/)\.\.(/|$)": "a path above the working folder",
    r"gradebook\.db|(^|/)(submitted|autograded|feedback)/": "the course's gradebook or "
    "other students' files",
}
# modules of the grader itself: in every lab
GRADER = (
    "zerobook.labs",
    "zerobook.classroom",
    "zerobook.trust.report_guard",
    "zerobook.data_parallel.inflight",
    "zerobook.data_parallel.comm",
    "zerobook.launcher.dist",
    "zerobook.report",
    "zerobook.setup",
    "zerobook.grading",
    "zerobook.launcher.launch",
    "zerobook.torchrun",
    "zerobook.run_cache",
    "zerobook.launcher.rank_entry",
    "zerobook.launcher.rank_output",
    "zerobook.launcher.zygote*",
    "zerobook.launcher.agent",
    "zerobook.launcher.failures",
    "zerobook.train.parity",
    "zerobook.labs.bucket_events",
    "zerobook.labs.zero_events",
    "zerobook.labs.zero_held",
    "zerobook.labs.zero_probe",
    "zerobook.labs.zero3_events",
    "zerobook.labs.zero3_record",
    "zerobook.labs.zeropp_checks",
    "zerobook.train.capstone_train",
    "zerobook.figures.capstone",
)
DDP = ("torch.nn.parallel", "torch.distributed.algorithms", "torch.distributed.Reducer")
FSDP = (
    "torch.distributed.fsdp",
    "torch.distributed._composable",
    "torch.distributed.tensor",
    "torch.distributed._tensor",
)
SHARDING = ("torch.distributed._shard", "torch.distributed.optim")
# the built-in collectives a ring replaces
COLLECTIVES = tuple(
    f"torch.distributed.{name}"
    for name in ("all_reduce*", "reduce", "reduce_scatter*", "all_gather*", "broadcast")
)
# lab -> the course's modules that implement what it grades (the lab's rules keep them from
# the student's file; the review compares the student's functions with theirs)
COURSE = {
    "setup_check": (),
    "memory": ("zerobook.train.measure", "zerobook.accounting.memory"),
    "ddp": ("zerobook.data_parallel.ddp",),
    "ring_allreduce": ("zerobook.data_parallel.collectives",),
    "zero": ("zerobook.zero",),
    "zero3": ("zerobook.zero",),
    "fsdp2": ("zerobook.fsdp2", "zerobook.train.sharded_checkpoint"),
    "capstone": ("zerobook.data_parallel.ddp", "zerobook.zero"),
    "bug_zoo": ("zerobook.data_parallel.ddp", "zerobook.runs.gone_wrong"),
    "zeropp": ("zerobook.zero.quantized", "zerobook.zero.hpz", "zerobook.zero.qgz"),
}
# why PyTorch's implementations matter, by what they implement
LIBRARY_WHY = {
    DDP: "PyTorch's DDP, which the ddp and capstone labs have you write",
    FSDP: "PyTorch's FSDP, which the zero, zero3 and capstone labs have you write",
    SHARDING: "PyTorch's sharding (ShardedTensor, ZeroRedundancyOptimizer), which the "
    "zero labs have you write",
    COLLECTIVES: "a built-in collective, which the ring lab has you write from sends and "
    "receives",
}
# lab -> PyTorch's implementations no solution of it needs (a lab not listed: DDP, FSDP
# and sharding)
LIBRARY = {
    "ring_allreduce": (DDP, FSDP, SHARDING, COLLECTIVES),
    "fsdp2": (DDP, SHARDING),  # FSDP2 itself is the lab's point
}
# lab -> attributes its own solution needs, not flagged there (Lab 9's node is a process group)
NEEDED = {"zeropp": ("new_group",)}


def lab_names(lab: str) -> dict[str, str]:
    """Every qualified name pattern flagged in `lab` -> why."""
    own = {p: "the grader's own code" for p in GRADER}
    labs = {
        m: [n for n, ms in COURSE.items() if m in ms]
        for ms in COURSE.values()
        for m in ms
    }
    course = {
        m: "the course's own implementation of what this lab grades"
        if lab in graders
        else f"the course's own implementation of what the {', '.join(graders)} labs grade"
        for m, graders in labs.items()
    }
    own, course = with_old_names(own), with_old_names(course)
    torch = {
        p: LIBRARY_WHY[group]
        for group in LIBRARY.get(lab, (DDP, FSDP, SHARDING))
        for p in group
    }
    return NAMES | own | course | torch


def with_old_names(patterns: dict[str, str]) -> dict[str, str]:
    """`patterns` and, for each module that moved into a room (zerobook/_moved.py) and that a
    pattern matches, its old name with the same why: `from zerobook import dist` is
    zerobook.launcher.dist, flagged alike."""
    old = {
        f"zerobook.{was}": why
        for was, now in MOVED.items()
        for pattern, why in patterns.items()
        if fnmatchcase(f"zerobook.{now}", pattern)
    }
    return old | patterns
