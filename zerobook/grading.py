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
import time
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


class StepFailed(RuntimeError):
    """An nbgrader command failed; the message is the end of what it printed."""


def nbgrader(labs: Path, root: Path, *args: str) -> None:
    """Run one nbgrader command in labs/ (where its config lives) on course directory `root`;
    raise StepFailed with the end of its output if it fails."""
    bin_dir = os.path.dirname(sys.executable)  # nbgrader calls `alembic` from PATH
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               **{COURSE_ROOT_ENV: str(root.resolve())})
    command = [sys.executable, "-m", "nbgrader", *args]
    print("$", " ".join(["nbgrader", *args]), flush=True)
    done = subprocess.run(command, cwd=labs, env=env, capture_output=True, text=True)
    print(done.stdout[-20_000:], done.stderr[-20_000:], sep="", end="", flush=True)
    if done.returncode:
        errors = [line for line in done.stderr.splitlines() if "[ERROR]" in line or "Error" in line]
        raise StepFailed("; ".join(errors[-3:])[-1_000:] or f"nbgrader {args[0]} exited {done.returncode}")


def release(labs: Path, root: Path, only=()) -> None:
    """Student versions (every lab, or those in `only`): solutions replaced, hidden tests
    removed, outputs cleared."""
    for lab in lab_names(labs):
        if not only or lab in only:
            nbgrader(labs, root, "generate_assignment", lab, "--force")
    print(f"released to {root / 'release'}")


def submitted(root: Path) -> dict[str, list[str]]:
    """lab -> the students who submitted it (folders submitted/STUDENT/LAB)."""
    out: dict[str, list[str]] = {}
    for folder in sorted((root / "submitted").glob("*/*")):
        if folder.is_dir():
            out.setdefault(folder.name, []).append(folder.parent.name)
    return out


def failure_feedback(root: Path, student: str, lab: str, reason: str) -> None:
    """A feedback page for a submission that could not be graded: why, and that it scored 0."""
    from html import escape

    page = root / "feedback" / student / lab / f"{lab}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(f"<html><body><h1>{escape(lab)}: not graded</h1><p>Your submission could not be graded, "
                    f"so it scores 0: {escape(reason)}</p><p>Fix it, run every cell from the top, save, and "
                    f"submit again.</p></body></html>\n")


def add_failed_rows(scores: Path, failures: list[tuple[str, str, str]]) -> None:
    """grades.csv rows (score 0) for submissions nbgrader could not grade, so nobody is missing."""
    import csv

    rows = list(csv.DictReader(scores.open())) if scores.exists() else []
    fields = list(rows[0]) if rows else ["assignment", "student_id", "score", "max_score"]
    have = {(r["assignment"], r["student_id"]) for r in rows}
    for student, lab, _ in failures:
        if (lab, student) not in have:
            rows.append({**{f: "" for f in fields}, "assignment": lab, "student_id": student, "score": "0.0"})
    with scores.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def graded_since(root: Path, student: str, lab: str, start: float) -> bool:
    """Whether nbgrader wrote this student's autograded notebook of `lab` after `start`."""
    notebook = root / "autograded" / student / lab / f"{lab}.ipynb"
    return notebook.exists() and notebook.stat().st_mtime >= start


def grade_lab(labs: Path, root: Path, lab: str, students: list[str]) -> list[tuple[str, str, str]]:
    """Autograde `lab` and give feedback, all students in one nbgrader call; where that fails,
    the students it did not grade on their own, to find each one's reason: one broken submission
    (not JSON, a dead kernel, a timeout) fails only itself. Returns (student, lab, reason) for each
    submission that could not be graded; everyone else gets feedback."""
    nbgrader(labs, root, "generate_assignment", lab, "--force")  # the gradebook needs it
    start = time.time() - 1  # file times may be coarser than the clock
    try:
        nbgrader(labs, root, "autograde", lab, "--force")
    except StepFailed:
        print(f"{lab}: grading the submissions nbgrader left ungraded one by one", flush=True)
    failures = []
    for student in [s for s in students if not graded_since(root, s, lab, start)]:
        try:
            nbgrader(labs, root, "autograde", lab, "--force", "--student", student)
        except StepFailed as error:
            failures.append((student, lab, str(error)))
            failure_feedback(root, student, lab, str(error))
    failed = {student for student, _, _ in failures}
    try:
        nbgrader(labs, root, "generate_feedback", lab, "--force")
    except StepFailed:
        for student in [s for s in students if s not in failed]:
            nbgrader(labs, root, "generate_feedback", lab, "--force", "--student", student)
    return failures


def grade(labs: Path, root: Path, only=()) -> tuple[Path, list]:
    """Autograde every submission (of the labs in `only`, if given), write feedback HTML and a
    CSV of scores for everyone, whatever fails; return the CSV and the failures. A lab submitted
    without its source notebook is an error: nothing is graded."""
    wanted = {lab: students for lab, students in submitted(root).items() if not only or lab in only}
    missing = sorted(set(wanted) - set(lab_names(labs)))
    if missing:
        raise SystemExit(f"submissions for {', '.join(missing)} but no source notebook "
                         f"({', '.join(f'labs/{m}/{m}.ipynb' for m in missing)}): restore it; nothing was graded")
    failures = [f for lab, students in sorted(wanted.items()) for f in grade_lab(labs, root, lab, students)]
    scores = root / "grades.csv"
    nbgrader(labs, root, "export", f"--to={scores}")
    add_failed_rows(scores, failures)
    print(f"scores: {scores}\nfeedback: {root / 'feedback'}")
    for student, lab, reason in failures:
        print(f"NOT GRADED: {student} / {lab}: {reason}")
    return scores, failures


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m zerobook.grading")
    parser.add_argument("step", choices=["release", "grade"])
    parser.add_argument("--labs", type=Path, default=Path("labs"))
    parser.add_argument("--root", type=Path, default=Path(os.environ.get(COURSE_ROOT_ENV, "_build/nbgrader")))
    parser.add_argument("--only", nargs="*", default=(), metavar="LAB", help="these labs only")
    cli = parser.parse_args(argv)
    cli.root.mkdir(parents=True, exist_ok=True)
    if cli.step == "release":
        release(cli.labs.resolve(), cli.root.resolve(), cli.only)
        return
    _, failures = grade(cli.labs.resolve(), cli.root.resolve(), cli.only)
    if failures:
        sys.exit(f"{len(failures)} submission(s) could not be graded (listed above); everyone else was")


if __name__ == "__main__":
    main()
