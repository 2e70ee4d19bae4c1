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
import json
import os
import subprocess
import sys
from pathlib import Path

from zerobook.launch import RunResult, torchrun

COURSE_ROOT_ENV = "ZEROBOOK_COURSE_ROOT"
PART_TIMEOUT_S = 60  # a student's infinite loop costs this much, then grading goes on (a part
# takes 5-30 s on 2 busy cores: the limit leaves room for a slow laptop)


def run_part(lab: str, student_file: str, part: str, nproc: int = 4,
             timeout: float = PART_TIMEOUT_S, debug: bool = True, **launch_options) -> RunResult:
    """Launch lab `lab`'s trusted harness on `nproc` ranks for one part of the student's file.

    debug=True checks that every collective matches across ranks (TORCH_DISTRIBUTED_DEBUG=DETAIL).
    Harnesses that wrap the model in DDP pass debug=False: in torch 2.13 DDP's constructor crashes
    (SIGSEGV) on gloo in DETAIL mode. launch_options: zb.torchrun's (backend, env).
    """
    stubs = function_stubs(student_file)
    if stubs and all(stubs.values()):
        raise NotImplementedError(f"{Path(student_file).name}: no function is implemented yet "
                                  f"({', '.join(stubs)} still raise NotImplementedError)")
    return torchrun(f"zerobook.labs.{lab}", nproc=nproc, timeout=timeout, debug=debug,
                    args=["--student", student_file, "--part", part], **launch_options)


def reference_script(labs: Path, lab: str) -> str:
    """The rank script of lab `lab`'s instructor notebook (its solutions in), as the student's
    `%%writefile` cell writes it (without that line)."""
    notebook = json.loads((Path(labs) / lab / f"{lab}.ipynb").read_text())
    cell = next(c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "rank_script")
    return "".join(cell["source"]).split("\n", 1)[1]


def function_stubs(student_file: str) -> dict[str, bool] | None:
    """Each top-level function of the student's file -> whether its body is still nbgrader's stub
    (`raise NotImplementedError()`, after an optional docstring); None if the file does not parse
    (the launch reports that, from the rank that imports it)."""
    try:
        tree = ast.parse(Path(student_file).read_text())
    except (OSError, SyntaxError):
        return None
    stub = ast.dump(ast.parse("raise NotImplementedError()").body[0])
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
            out[node.name] = len(body) == 1 and ast.dump(body[0]) == stub
    return out


def unimplemented(student_file: str) -> list[str]:
    """The student's functions still left as nbgrader's stub."""
    return [name for name, stub in (function_stubs(student_file) or {}).items() if stub]


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
