"""Lab grading: launch one part of a lab on ranks (students), release and grade (instructors).

    python -m zerobook.grading release   # labs/*/NAME.ipynb -> _build/nbgrader/release/NAME/
    python -m zerobook.grading grade     # new or changed submissions under _build/nbgrader/submitted/
    python -m zerobook.grading grade --jobs 2 --all   # two at once, every submission again
    python -m zerobook.grading release --only zero3 fsdp2   # some labs only (release or grade)
    python -m zerobook.grading book      # student versions for the book: labs/ -> book/labs/NAME.ipynb

Grading runs each student's code in a sandbox (zerobook.sandbox: bubblewrap) and scores it by a
clean re-run (zerobook.clean_score); zerobook.classroom does it for a class.

The course directory (nbgrader's root) is `_build/nbgrader` unless --root says otherwise; the
instructor notebooks stay in `labs/`, which `labs/nbgrader_config.py` makes nbgrader's source.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from pathlib import Path

from zerobook.launch import RunResult, torchrun

COURSE_ROOT_ENV = "ZEROBOOK_COURSE_ROOT"
SANDBOX_RANKS_ENV = "ZEROBOOK_SANDBOX_RANKS"  # zerobook.clean_score sets it: run_part sandboxes its ranks
PART_TIMEOUT_ENV = "ZEROBOOK_PART_TIMEOUT"  # grading sets it from the reference's time (zerobook.classroom)
BOOK_LABS = Path("book/labs")  # the book's "Labs" part (git-ignored: `make book` writes it)
PART_TIMEOUT_S = 60  # a student's infinite loop costs this much, then grading goes on (a part
# takes 5-30 s on 2 busy cores: the limit leaves room for a slow laptop)


def run_part(lab: str, student_file: str, part: str, nproc: int = 4,
             timeout: float | None = None, debug: bool = True, **launch_options) -> RunResult:
    """Launch lab `lab`'s trusted harness on `nproc` ranks for one part of the student's file.

    debug=True checks that every collective matches across ranks (TORCH_DISTRIBUTED_DEBUG=DETAIL).
    Harnesses that wrap the model in DDP pass debug=False: in torch 2.13 DDP's constructor crashes
    (SIGSEGV) on gloo in DETAIL mode. launch_options: zb.torchrun's (backend, env).
    """
    stubs = function_stubs(student_file)
    if stubs and all(stubs.values()):
        raise NotImplementedError(f"{Path(student_file).name}: no function is implemented yet "
                                  f"({', '.join(stubs)} still raise NotImplementedError)")
    from zerobook import run_cache

    name = run_cache.key(lab, student_file, part, nproc, dict(launch_options, debug=debug))
    replayed = run_cache.replay(name)  # grading: the clean run launched it already
    if replayed is not None:
        return replayed
    timeout = timeout or float(os.environ.get(PART_TIMEOUT_ENV, PART_TIMEOUT_S))
    if os.environ.get(SANDBOX_RANKS_ENV):  # grading (zerobook.clean_score): the ranks see only this folder
        launch_options.setdefault("sandbox", [os.getcwd()])
    return run_cache.record(name, lambda: torchrun(f"zerobook.labs.{lab}", nproc=nproc, timeout=timeout, debug=debug,
                                                   args=["--student", student_file, "--part", part], **launch_options))


_SHARED: dict = {}  # run_shared's launches: key -> RunResult, or the exception it raised


def run_shared(lab: str, student_file: str, part: str, nproc: int = 4, **options) -> RunResult:
    """run_part, launched once for every test that reads the same run: a later call with the same
    lab, part, ranks, options and student file (its bytes, and when it was written: running the
    cell that writes it launches again) returns its result, or raises its error again (a failed
    launch is not repeated by each test that shares it)."""
    from zerobook import run_cache

    written = Path(student_file).stat().st_mtime_ns if Path(student_file).is_file() else None
    name = (run_cache.key(lab, student_file, part, nproc, options), written)
    if name not in _SHARED:
        try:
            _SHARED[name] = run_part(lab, student_file, part, nproc=nproc, **options)
        except Exception as exc:
            _SHARED[name] = exc
    if isinstance(_SHARED[name], Exception):
        raise _SHARED[name]
    return _SHARED[name]


def reference_script(labs: Path, lab: str) -> str:
    """The rank script of lab `lab`'s instructor notebook (its solutions in), as the student's
    `%%writefile` cell writes it (without that line)."""
    notebook = json.loads((Path(labs) / lab / f"{lab}.ipynb").read_text())
    cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "rank_script")
    return "".join(cell["source"]).split("\n", 1)[1]


def harness_source(lab: str, *names: str) -> str:
    """The source of the named top-level functions and classes of lab `lab`'s trusted harness
    (zerobook/labs/LAB.py), read as text: what the grader does with a student's file, shown in the
    lab without importing torch into the notebook."""
    from importlib import resources

    text = resources.files("zerobook").joinpath(f"labs/{lab}.py").read_text()
    found = {node.name: ast.get_source_segment(text, node) for node in ast.parse(text).body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    missing = [name for name in names if name not in found]
    if missing:
        raise KeyError(f"zerobook/labs/{lab}.py defines no {', '.join(missing)}")
    return "\n\n\n".join(found[name] for name in names)


def function_stubs(student_file: str) -> dict[str, bool] | None:
    """Each top-level function (and method of a top-level class, as "Class.method") of the
    student's file -> whether its body is still nbgrader's stub
    (`raise NotImplementedError()`, after an optional docstring); None if the file does not parse
    (the launch reports that, from the rank that imports it)."""
    try:
        tree = ast.parse(Path(student_file).read_text())
    except (OSError, SyntaxError):
        return None
    stub = ast.dump(ast.parse("raise NotImplementedError()").body[0])
    out = {}
    functions = [(node.name, node) for node in tree.body if isinstance(node, ast.FunctionDef)]
    functions += [(f"{node.name}.{f.name}", f) for node in tree.body if isinstance(node, ast.ClassDef)
                  for f in node.body if isinstance(f, ast.FunctionDef)]  # a class skeleton's methods
    for name, node in functions:
        body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        out[name] = len(body) == 1 and ast.dump(body[0]) == stub
    return out


def unimplemented(student_file: str) -> list[str]:
    """The student's functions still left as nbgrader's stub."""
    return [name for name, stub in (function_stubs(student_file) or {}).items() if stub]


def lab_names(labs: Path) -> list[str]:
    """Every lab: a folder of labs/ holding a notebook of the same name."""
    return sorted(p.name for p in labs.iterdir() if (p / f"{p.name}.ipynb").is_file())


def release(labs: Path, root: Path, only=()) -> None:
    """Student versions (every lab, or those in `only`): solutions replaced, hidden tests
    removed, outputs cleared."""
    from zerobook.classroom import release_lab

    for lab in lab_names(labs):
        if not only or lab in only:
            print(release_lab(labs, root, lab)[-2_000:], flush=True)
    print(f"released to {root / 'release'}")



def student_version(labs: Path, lab: str):
    """Lab `lab`'s student notebook as `release` makes it, in this process (nbgrader's own
    preprocessors, labs/nbgrader_config.py's settings): solutions replaced by the stub, hidden
    tests and mark schemes removed, outputs cleared. Measured on 2 cores: 1.5 s for the six labs
    (mostly importing nbgrader), against 14 s for `release`'s nbgrader run."""
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme, ClearOutput, ClearSolutions
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(labs)).load_config()
    notebook = nbformat.read(Path(labs) / lab / f"{lab}.ipynb", as_version=4)
    for step in (ClearSolutions, ClearHiddenTests, ClearMarkScheme, ClearOutput):
        notebook, _ = step(config=config).preprocess(notebook, {})
    return notebook


def book_labs(labs: Path, out: Path) -> list[Path]:
    """Every lab's student version as out/NAME.ipynb, for the book's "Labs" part; marked for
    myst-nb not to be executed (its stubs raise)."""
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.ipynb"):  # a lab renamed or removed leaves no page behind
        stale.unlink()
    written = []
    for lab in lab_names(labs):
        notebook = student_version(labs, lab)
        notebook.metadata["mystnb"] = {"execution_mode": "off"}
        written.append(out / f"{lab}.ipynb")
        nbformat.write(notebook, written[-1])
    return written


def main(argv=None) -> None:
    from zerobook import classroom, sandbox

    parser = argparse.ArgumentParser(prog="python -m zerobook.grading")
    parser.add_argument("step", choices=["release", "grade", "book"])
    parser.add_argument("--labs", type=Path, default=Path("labs"))
    parser.add_argument("--root", type=Path, default=Path(os.environ.get(COURSE_ROOT_ENV, "_build/nbgrader")))
    parser.add_argument("--only", nargs="*", default=(), metavar="LAB", help="these labs only")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once")
    parser.add_argument("--all", action="store_true", help="regrade unchanged submissions too")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="grade without bubblewrap: students' code can then read and change the course")
    cli = parser.parse_args(argv)
    if cli.step == "book":
        print(f"student versions of {len(book_labs(cli.labs.resolve(), BOOK_LABS))} labs in {BOOK_LABS}")
        return
    cli.root.mkdir(parents=True, exist_ok=True)
    if cli.step == "release":
        release(cli.labs.resolve(), cli.root.resolve(), cli.only)
        return
    why = None if cli.no_sandbox else sandbox.available()
    if why:
        sys.exit(f"not grading: {why}. Students' code would run with your rights, able to read the solutions "
                 "and other submissions and to rewrite the gradebook. Install it, or pass --no-sandbox to "
                 "grade trusted notebooks anyway.")
    _, outcomes = classroom.grade(cli.labs.resolve(), cli.root.resolve(), cli.only, jobs=cli.jobs,
                                  everyone=cli.all, sandboxed=not cli.no_sandbox)
    failures = [o for o in outcomes if o.failure]
    if failures:
        sys.exit(f"{len(failures)} submission(s) could not be graded (listed above); everyone else was")


if __name__ == "__main__":
    main()
