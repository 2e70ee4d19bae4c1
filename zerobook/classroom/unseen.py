"""The course's own implementation of what a lab grades, hidden from a graded submission.

    hidden = unseen.files("ddp")          # [.../zerobook/data_parallel/ddp.py, .../zerobook/labs/bucket_events.py]
    unseen.binds(hidden, stub)            # bwrap arguments that put `stub` in their place

A graded rank script cannot import the course's modules, nor read a file (its lab's rules:
zerobook.trust.policy); the notebook functions the function server runs are not under those
rules, and could read a module's source and run it under another name. So every sandbox of a
graded submission (its notebook functions' server and its ranks: zerobook.classroom.clean_score) sees,
at each such module's path, a stub that raises ImportError instead: a module's file (and its
folder's compiled copies, __pycache__), or a package's whole folder; in every checkout of the
package the sandbox binds. Each harness names them in UNSEEN (modules it does not import itself:
tests/test_unseen.py checks); the lab's other modules stay readable.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # zerobook/
STUB = (
    "raise ImportError(f\"{__name__} is hidden while this lab is graded: it is the course's own "
    'implementation of what the lab grades; write yours")\n'
)


def names(lab: str) -> tuple[str, ...]:
    """The modules lab `lab`'s harness lists in UNSEEN (read from its source, not imported)."""
    source = (PACKAGE / "labs" / f"{lab}.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "UNSEEN" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    return ()


def path_of(module: str) -> Path:
    """A zerobook module's file, or its package's folder."""
    parts = module.split(".")
    if parts[0] != "zerobook":
        raise ValueError(f"only the course's own modules can be hidden, not {module}")
    base = PACKAGE.joinpath(*parts[1:])
    return base if base.is_dir() else base.with_suffix(".py")


def files(lab: str) -> list[Path]:
    """What a graded submission of `lab` must not see (UNSEEN's files and folders)."""
    return [path_of(module) for module in names(lab)]


def write_stub(folder: Path) -> Path:
    """The stub, written once in a folder of the grader's (never one a sandbox can write),
    beside an empty folder that stands for a hidden module's __pycache__."""
    stub = Path(folder) / "unseen_stub.py"
    stub.write_text(STUB)
    (Path(folder) / "empty").mkdir(exist_ok=True)
    return stub


def binds(hidden, stub: Path, roots=()) -> list[str]:
    """bwrap arguments, after the package's own read-only binds: in the package and in each of
    `roots` (other folders of it the sandbox binds: another checkout an editable install points
    at), each hidden file replaced by the stub and its folder's __pycache__ (compiled copies of
    it) by an empty folder, each hidden folder by an empty one whose __init__.py is the stub."""
    args, caches = [], set()
    for root in dict.fromkeys([PACKAGE, *map(Path, roots)]):
        for path in map(Path, hidden):
            real = (Path(root) / path.resolve().relative_to(PACKAGE)).resolve()
            if real.is_dir():
                args += [
                    "--tmpfs",
                    str(real),
                    "--ro-bind",
                    str(stub),
                    str(real / "__init__.py"),
                ]
            elif real.exists():
                args += ["--ro-bind", str(stub), str(real)]
                caches.add(real.parent / "__pycache__")
    for cache in sorted(c for c in caches if c.is_dir()):
        args += ["--ro-bind", str(stub.parent / "empty"), str(cache)]
    return args
