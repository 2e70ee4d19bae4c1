"""Lab grading: launch one part of a lab on ranks (students), release and grade (instructors).

    python -m zerobook.grading release   # labs/*/NAME.ipynb -> _build/nbgrader/release/NAME/
    python -m zerobook.grading grade     # every submission under _build/nbgrader/submitted/
    python -m zerobook.grading release --only zero3 fsdp2   # some labs only (release or grade)

The course directory (nbgrader's root) is `_build/nbgrader` unless --root says otherwise; the
instructor notebooks stay in `labs/`, which `labs/nbgrader_config.py` makes nbgrader's source.
"""
from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path

from zerobook.launch import RunResult, torchrun

COURSE_ROOT_ENV = "ZEROBOOK_COURSE_ROOT"
PART_TIMEOUT_S = 30  # a student's infinite loop costs this much, then grading goes on


def run_part(lab: str, student_file: str, part: str, nproc: int = 4,
             timeout: float = PART_TIMEOUT_S, debug: bool = True) -> RunResult:
    """Launch lab `lab`'s trusted harness on `nproc` ranks for one part of the student's file.

    debug=True checks that every collective matches across ranks (TORCH_DISTRIBUTED_DEBUG=DETAIL).
    Harnesses that wrap the model in DDP pass debug=False: in torch 2.13 DDP's constructor crashes
    (SIGSEGV) on gloo in DETAIL mode.
    """
    stubs = unimplemented(student_file)
    if stubs is not None and stubs == defined_functions(student_file):
        raise NotImplementedError(f"{Path(student_file).name}: no function is implemented yet "
                                  f"({', '.join(stubs)} still raise NotImplementedError)")
    return torchrun(f"zerobook.labs.{lab}", nproc=nproc, timeout=timeout, debug=debug,
                    args=["--student", student_file, "--part", part])


def defined_functions(student_file: str) -> list[str] | None:
    """Names of the top-level functions of the student's file (None if it does not parse)."""
    try:
        tree = ast.parse(Path(student_file).read_text())
    except (OSError, SyntaxError):
        return None  # the launch reports it, from the rank that imports the file
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]


def unimplemented(student_file: str) -> list[str] | None:
    """Top-level functions whose body is still nbgrader's stub (`raise NotImplementedError()`,
    after an optional docstring): the untouched release, caught before launching any rank."""
    try:
        tree = ast.parse(Path(student_file).read_text())
    except (OSError, SyntaxError):
        return None
    stub = ast.dump(ast.parse("raise NotImplementedError()").body[0])
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
            if len(body) == 1 and ast.dump(body[0]) == stub:
                out.append(node.name)
    return out


def lab_names(labs: Path) -> list[str]:
    """Every lab: a folder of labs/ holding a notebook of the same name."""
    return sorted(p.name for p in labs.iterdir() if (p / f"{p.name}.ipynb").is_file())


def nbgrader(labs: Path, root: Path, *args: str) -> None:
    """Run one nbgrader command in labs/ (where its config lives) on course directory `root`."""
    bin_dir = os.path.dirname(sys.executable)  # nbgrader calls `alembic` from PATH
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               **{COURSE_ROOT_ENV: str(root.resolve())})
    command = [sys.executable, "-m", "nbgrader", *args]
    print("$", " ".join(["nbgrader", *args]), flush=True)
    subprocess.run(command, cwd=labs, env=env, check=True)


def release(labs: Path, root: Path, only=()) -> None:
    """Student versions (every lab, or those in `only`): solutions replaced, hidden tests
    removed, outputs cleared."""
    for lab in lab_names(labs):
        if not only or lab in only:
            nbgrader(labs, root, "generate_assignment", lab, "--force")
    print(f"released to {root / 'release'}")


def grade(labs: Path, root: Path, only=()) -> Path:
    """Autograde every submission (of the labs in `only`, if given), write feedback HTML and a
    CSV of scores; return the CSV. Labs nobody submitted are skipped."""
    for lab in lab_names(labs):
        if any((root / "submitted").glob(f"*/{lab}")) and (not only or lab in only):
            nbgrader(labs, root, "generate_assignment", lab, "--force")  # the gradebook needs it
            nbgrader(labs, root, "autograde", lab, "--force")
            nbgrader(labs, root, "generate_feedback", lab, "--force")
    scores = root / "grades.csv"
    nbgrader(labs, root, "export", f"--to={scores}")
    print(f"scores: {scores}\nfeedback: {root / 'feedback'}")
    return scores


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m zerobook.grading")
    parser.add_argument("step", choices=["release", "grade"])
    parser.add_argument("--labs", type=Path, default=Path("labs"))
    parser.add_argument("--root", type=Path, default=Path(os.environ.get(COURSE_ROOT_ENV, "_build/nbgrader")))
    parser.add_argument("--only", nargs="*", default=(), metavar="LAB", help="these labs only")
    cli = parser.parse_args(argv)
    cli.root.mkdir(parents=True, exist_ok=True)
    (release if cli.step == "release" else grade)(cli.labs.resolve(), cli.root.resolve(), cli.only)


if __name__ == "__main__":
    main()
