"""A static review of a graded submission: what no honest solution needs, flagged for the
instructor.

    flags = review.review(notebook, "ddp")      # the submitted notebook, as JSON
    flags = review.review_file(path, "ddp")     # what the grader calls, beside tampered_tests
    # ["rank_script line 12: gc.get_objects: reaches every object of the process, ...", ...]

The student's code runs in the same process as the lab's trusted harness, so it can forge in
memory what the sandbox cannot stop; the clean run limits what it reaches, and this review reads
it. Every code cell the student writes (nbgrader's solution cells, the `%%writefile` rank script,
cells they added) is parsed, never run: a cell magic's line and the IPython lines Python cannot
parse (`%magic`, `!command`) are blanked, so line numbers are the cell's; code held in a string
(to exec it) is read as code too. A flag names the cell and line, the construct and why it
matters (zerobook.classroom.review_rules, per lab; review_constructs reads the code), or a
function that copies the course's own implementation (review_copies). Module-level state that
functions change is shown only beside other flags: alone it is a matter of style. A flag asks
for the instructor's eye; it changes no score.
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat
import threading
import warnings
from pathlib import Path

from zerobook.classroom.colab_cell import is_course_cell
from zerobook.classroom.review_constructs import constructs
from zerobook.classroom.review_copies import copies
from zerobook.classroom.review_rules import ATTRIBUTES, COURSE, NEEDED, lab_names

# a cell magic after which the cell is still Python (any other: not Python, not reviewed)
PYTHON_CELLS = ("%%writefile", "%%time", "%%timeit", "%%capture")
MAGIC = re.compile(r"^(\s*)([\w.\[\], ]+=\s*)?[%!]")  # %magic, !command, x = !command
CONTAINERS = {"list", "dict", "set", "defaultdict", "deque", "OrderedDict", "Counter"}
MUTATORS = {"append", "extend", "insert", "update", "add", "setdefault", "pop", "clear"}
NOTEBOOK_BYTES = 64 * 2**20  # a submission's notebook, read at most
HIDDEN = "module-level state changed inside functions (kept across the harness's calls)"
# One review at a time: `grade --jobs N` reviews in threads, and CPython 3.11's ast.parse keeps
# a recursion count in state the threads share (cpython gh-106905, seen in threaded use): a
# review raised "SystemError: AST constructor recursion depth mismatch" once (make test-grading,
# Lab 4's forgery class, 2026-11-27).
REVIEWING = threading.Lock()


def student_cells(notebook: dict) -> list[tuple[str, str]]:
    """(name, source) of every code cell the student writes: nbgrader's solution cells (named
    by grade_id) and cells without nbgrader's metadata, which the student added ("cell N"); the
    Colab cell the release starts with is the course's, unless it was changed."""
    out = []
    cells = notebook.get("cells")
    for number, cell in enumerate(cells if isinstance(cells, list) else [], 1):
        if not isinstance(cell, dict):
            continue
        meta = cell.get("metadata")
        meta = meta.get("nbgrader") if isinstance(meta, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        if cell.get("cell_type") == "code" and (not meta or meta.get("solution")):
            source = cell.get("source", "")
            text = (
                "".join(map(str, source)) if isinstance(source, list) else str(source)
            )
            if not (not meta and is_course_cell(text)):
                out.append((str(meta.get("grade_id") or f"cell {number}"), text))
    return out


def parsed(text: str) -> ast.Module | SyntaxError | None:
    """The cell's Python, its magics blanked (the line numbers stay); the error, if it is not
    Python; None for a cell magic of another language."""
    lines = text.split("\n")
    if lines[0].startswith("%%"):
        if not lines[0].startswith(PYTHON_CELLS):
            return None
        lines[0] = ""
    for _ in lines:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return ast.parse("\n".join(lines))
        except SyntaxError as exc:
            row = (exc.lineno or 0) - 1
            magic = MAGIC.match(lines[row]) if 0 <= row < len(lines) else None
            if not magic:
                return exc
            lines[row] = magic.group(1) + "pass"  # where IPython would run a magic
    return SyntaxError("a magic on every line")


def pieces(tree: ast.Module, offset: int = 0, depth: int = 0):
    """(line offset, tree, where) of the cell's code and of code held in its strings."""
    yield offset, tree, ""
    for node in ast.walk(tree) if depth < 3 else ():
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            inner = code_in(node.value)
            if inner is not None:
                for found in pieces(inner, offset + node.lineno - 1, depth + 1):
                    yield found[0], found[1], " (code in a string)"


def code_in(text: str) -> ast.Module | None:
    """`text` as Python, if it is code that does something (defines, imports, calls)."""
    if len(text) < 8:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    doing = (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Call)
    return tree if any(isinstance(n, doing) for n in ast.walk(tree)) else None


def hidden_state(tree: ast.Module) -> list[tuple[int, str, str]]:
    """Module-level lists, dicts and sets that the module's functions change."""
    kept = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        value = getattr(node, "value", None)
        called = getattr(value, "func", None)
        called = getattr(called, "id", None) or getattr(called, "attr", None)
        literal = isinstance(value, (ast.List, ast.Dict, ast.Set))
        if isinstance(target, ast.Name) and (literal or called in CONTAINERS):
            kept[target.id] = node.lineno
    changed = set()
    for function in ast.walk(tree):
        defined = isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function) if defined else ():
            if isinstance(node, ast.Global):
                changed |= set(node.names)
            elif isinstance(node, ast.Attribute) and node.attr in MUTATORS:
                changed.add(getattr(node.value, "id", None))
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                changed.add(getattr(node.value, "id", None))
    return [(line, name, HIDDEN) for name, line in kept.items() if name in changed]


def review(notebook: dict, lab: str) -> list[str]:
    """The flags of a submission of `lab`: each one line, naming the cell, the line, the
    construct and why it matters."""
    names, modules = lab_names(lab), COURSE.get(lab, ())
    needed = {ATTRIBUTES[name] for name in NEEDED.get(lab, ())}
    found, state = [], []  # (cell, line, code, why)
    for cell, text in student_cells(notebook):
        tree = parsed(text)
        if isinstance(tree, SyntaxError):
            why = f"it does not parse as Python ({tree.msg})"
            found.append((cell, tree.lineno or 1, "not reviewed", why))
        elif tree is None:
            magic = text.split(None, 1)[0]
            found.append(
                (cell, 1, magic, "not Python: commands the kernel runs, not reviewed")
            )
        if not isinstance(tree, ast.Module):
            continue
        mine = []
        for offset, piece, where in pieces(tree):
            for line, code, why in constructs(piece, names) + copies(piece, modules):
                if why in needed:
                    continue
                mine.append((cell, offset + line, code, why + where))
        seen = set()  # one flag per reason on a line: a.f_back.f_globals is one
        for cell, line, code, why in sorted(mine, key=lambda f: (f[1], -len(f[2]))):
            if (line, why) not in seen:
                found.append((cell, line, code, why))
            seen.add((line, why))
        state += [(cell, line, code, why) for line, code, why in hidden_state(tree)]
    return flag_lines(found + (state if found else []))


def flag_lines(found: list[tuple[str, int, str, str]]) -> list[str]:
    """One line per construct of a cell: its first line, the others it recurs on."""
    lines: dict[tuple[str, str, str], list[int]] = {}
    for cell, line, code, why in found:
        lines.setdefault((cell, code, why), []).append(line)
    out = []
    for (cell, code, why), rows in lines.items():
        rows = sorted(set(rows))
        also = f" (also {', '.join(map(str, rows[1:4]))}{'...' * (len(rows) > 4)})"
        out.append(f"{cell} line {rows[0]}{also * (len(rows) > 1)}: {code}: {why}")
    return out


def review_file(path: Path, lab: str) -> list[str]:
    """review() of the notebook at `path`, read as the grader reads what a student wrote: a
    regular file itself (no link followed, no FIFO waited on), at most NOTEBOOK_BYTES. Nothing
    to flag in a file that is not a notebook: the grader says so."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
            notebook = json.loads(file.read(NOTEBOOK_BYTES)) if regular else None
    except (OSError, ValueError):
        return []
    try:  # advisory: whatever the notebook holds, grading goes on
        with REVIEWING:
            return review(notebook, lab) if isinstance(notebook, dict) else []
    except Exception as exc:  # e.g. RecursionError: code nested too deep
        return [f"not reviewed: the review failed on it ({type(exc).__name__}: {exc})"]
