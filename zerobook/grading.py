"""What a lab notebook calls: launch one part of a lab on ranks, under the lab's trusted harness.

    run = zb.grading.run_part("ring_allreduce", "ring_student.py", "parity", nproc=4)
    run = zb.grading.run_shared("ddp", "ddp_student.py", "train", nproc=3)  # once per file
    print(zb.grading.harness_source("ddp", "train"))   # what the grader does with the file

Releasing and grading a class is the classroom's (zerobook.classroom, `python -m
zerobook.classroom release|grade|book`), which calls this module, never the other way:
while grading, it tells `run_part` to run the ranks in its sandbox (`sandbox_ranks`).
`python -m zerobook.grading ...` is kept as another name for that command.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

from zerobook import run_cache
from zerobook._moved import package_path
from zerobook.trust import untrusted, witness
from zerobook.launcher.launch import LaunchError, RunResult, RunTimedOut, torchrun

COURSE_ROOT_ENV = "ZEROBOOK_COURSE_ROOT"
PART_TIMEOUT_ENV = "ZEROBOOK_PART_TIMEOUT"  # grading sets it from the reference's time (zerobook.classroom)
_RANK_SANDBOX: list = []  # grading: what run_part runs its ranks in (zerobook.classroom.clean_score)
# a student's infinite loop costs this much, then grading goes on (a part takes 5-30 s on 2
# busy cores: the limit leaves room for a slow laptop)
PART_TIMEOUT_S = 60


def run_part(
    lab: str,
    student_file: str,
    part: str,
    nproc: int = 4,
    timeout: float | None = None,
    debug: bool = True,
    **launch_options,
) -> RunResult:
    """Launch lab `lab`'s trusted harness on `nproc` ranks for one part of the student's file.

    timeout: seconds for the launch (a lab's own, for a long run; else PART_TIMEOUT_S); while
    grading, the limit the classroom measured from the reference's run wins.
    debug=True: a run that fails in a collective is launched again with every collective checked
    across ranks (TORCH_DISTRIBUTED_DEBUG=DETAIL), and that run, which names the collectives that
    differ, is the one returned (`checked_on_failure`). Harnesses that wrap the model in DDP pass
    debug=False: in torch 2.13 DDP's constructor crashes (SIGSEGV) on gloo in DETAIL mode.
    launch_options: zb.torchrun's (backend, env).
    """
    stubs = function_stubs(student_file)
    if stubs and all(stubs.values()):
        raise NotImplementedError(
            f"{Path(student_file).name}: no function is implemented yet "
            f"({', '.join(stubs)} still raise NotImplementedError)"
        )
    name = run_cache.key(
        lab, student_file, part, nproc, dict(launch_options, debug=debug)
    )
    replayed = run_cache.replay(name)  # grading: the clean run launched it already
    if replayed is not None:
        return replayed
    # grading's limit (from the reference's time) wins; then the lab's own; then the default
    timeout = float(os.environ.get(PART_TIMEOUT_ENV) or timeout or PART_TIMEOUT_S)
    # grading (classroom.clean_score): the ranks see only this folder, and their lines are
    # not echoed into the test's output, which the feedback shows (a rank could print what
    # the harness handed the student's code: a hidden cap)
    if _RANK_SANDBOX:
        launch_options.setdefault("sandbox", _RANK_SANDBOX[-1])
        launch_options["echo"] = False
    return run_cache.record(
        name,
        lambda: as_witnessed(
            checked_on_failure(
                lambda detail: torchrun(
                    f"zerobook.labs.{lab}",
                    nproc=nproc,
                    timeout=timeout,
                    debug=detail,
                    args=["--student", student_file, "--part", part],
                    **launch_options,
                ),
                debug,
            )
        ),
    )


def checked_on_failure(launch, debug: bool) -> RunResult:
    """`launch(False)`; with `debug`, `launch(True)` (every collective checked across ranks:
    TORCH_DISTRIBUTED_DEBUG=DETAIL) in its place when the first run failed in a collective.

    The check cost a third of a lab run's CPU (2 cores: gloo runs a barrier and an all-gather of
    each collective's fingerprint first), and a run whose collectives match never needs it.
    Collectives that differ still fail an unchecked run (gloo aborts on sizes that differ; a
    peer that skipped one closes its link), unnamed: such runs are launched again, checked. Not
    launched again: a run past its whole timeout (an infinite loop would cost it twice), one
    whose first failure is the student's own error (the check would add nothing), one whose
    ranks all timed out in a collective (a deadlock: where each waited is said already, and a
    deadlocked ring's sends are not checked: it would wait twice).
    """
    try:
        run = launch(False)
    except RunTimedOut:
        raise
    except LaunchError:
        if not debug:
            raise
        return launch(True)
    failed = [report["failed"] for report in run.ranks if report.get("failed")]
    lost = failed and all(f.get("lost_peer") for f in failed)
    if debug and lost and not all(TIMED_OUT.search(f["error"]) for f in failed):
        return launch(True)
    return run


TIMED_OUT = re.compile(r"timed out", re.IGNORECASE)


def as_witnessed(run: RunResult) -> RunResult:
    """`run`, each rank's raw record checked against what its watcher saw as it happened
    (zerobook.trust.witness) and then left out; LaunchError naming the rank if one differs."""
    for rank, report in enumerate(run.ranks):
        wrong = witness.check(report, run.witnessed.get(rank))
        if wrong:
            raise LaunchError(
                f"rank {rank}: tampering: {wrong}: the student's code rewrote the run's "
                "record, so the run does not count",
                rank=rank,
                log=run.log,
            )
        report.pop(witness.RECORD_KEY, None)
    return run


def sandbox_ranks(sandbox) -> None:
    """From now on, run every part's ranks in `sandbox` (grading: the classroom's clean run
    passes zerobook.classroom.sandbox.RankSandbox; zb.torchrun's `sandbox`)."""
    _RANK_SANDBOX.append(sandbox)


_SHARED: dict = {}  # run_shared's launches: key -> RunResult, or the exception it raised


def run_shared(
    lab: str, student_file: str, part: str, nproc: int = 4, **options
) -> RunResult:
    """run_part, launched once for every test that reads the same run: a later call with the same
    lab, part, ranks, options and student file (its bytes, and when it was written: running the
    cell that writes it launches again) returns its result, or raises its error again (a failed
    launch is not repeated by each test that shares it)."""
    written = (
        Path(student_file).stat().st_mtime_ns if Path(student_file).is_file() else None
    )
    name = (run_cache.key(lab, student_file, part, nproc, options), written)
    if name not in _SHARED:
        try:
            _SHARED[name] = run_part(lab, student_file, part, nproc=nproc, **options)
        except Exception as exc:
            _SHARED[name] = exc
    if isinstance(_SHARED[name], Exception):
        raise _SHARED[name]
    return _SHARED[name]


def failure(run: RunResult) -> str | None:
    """The run's failure in words (zerobook.labs.crash): the rank that failed first, its
    step, its line and error, not the ranks that only lost it; None if every step ran."""
    from zerobook.labs.crash import describe, first_failed

    failed = [report["failed"] for report in run.ranks if report.get("failed")]
    return describe(first_failed(failed)) if failed else None


def not_checked(run: RunResult, needs: str = "the whole run") -> None:
    """Raise AssertionError if the run failed: a test that needs `needs` cannot check it
    (the tests that read only what ran before the failure still count)."""
    said = failure(run)
    if said:
        raise AssertionError(f"not checked ({needs} is needed): {said}")


def each_step(run: RunResult, check, ranks=(0,)) -> list[str]:
    """check(step, report) on every step each rank finished: the problems of the first
    step that has any, each naming its rank and step (some_finished first)."""
    some_finished(run, ranks)
    found = [
        (r, s, problems)
        for r in ranks
        for s, step in enumerate(run.ranks[r]["steps"])
        if (problems := check(step, run.ranks[r]))
    ]
    if not found:
        return []
    rank, step, problems = found[0]
    more = [f"(and {len(found) - 1} more step(s) with problems)"][: len(found) - 1]
    return [f"rank {rank}, step {step}: {problem}" for problem in problems] + more


def some_finished(run: RunResult, ranks=(0,), steps=lambda report: report["steps"]):
    """Raise "not checked" if none of `ranks` finished a step (`steps(report)`: its
    steps); if the run failed after some, say that the steps before it are checked."""
    if not any(steps(run.ranks[r]) for r in ranks):
        not_checked(run, "a finished step")
    if failure(run):
        print(f"checking the steps before it: {failure(run)}")


class PartFailed(RuntimeError):
    """A part of a launch that ran several raised on some rank (the others ran)."""


def part_reports(run: RunResult, part: str) -> list[dict]:
    """Each rank's report of `part`, from a launch of several parts (`--part a,b,...`:
    the harness reports `parts`); the first rank's error if that part raised there."""
    # a launch of one part reports it whole, not under "parts"
    reports = [rank.get("parts", {part: rank})[part] for rank in run.ranks]
    for rank, report in enumerate(reports):
        if set(report) == {"raised"}:
            raise PartFailed(f"part {part!r}, rank {rank}: {report['raised']}")
    return reports


def reference_script(labs: Path, lab: str) -> str:
    """The rank script of lab `lab`'s instructor notebook (its solutions in), as the student's
    `%%writefile` cell writes it (without that line)."""
    notebook = json.loads((Path(labs) / lab / f"{lab}.ipynb").read_text())
    cell = next(
        c
        for c in notebook["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "rank_script"
    )
    return "".join(cell["source"]).split("\n", 1)[1]


def harness_source(lab: str, *names: str, module: str | None = None) -> str:
    """The source of the named top-level functions and classes of lab `lab`'s trusted harness
    (zerobook/labs/LAB.py), or of another module it runs (`module`: its name,
    "zerobook.train.capstone_train"; an old name or path is read where it moved,
    zerobook/_moved.py), read as text: what the grader does with a student's file, shown in
    the lab without importing torch into the notebook."""
    from importlib import resources

    where = package_path(module or f"zerobook.labs.{lab}")
    text = resources.files("zerobook").joinpath(where).read_text()
    found = {
        node.name: ast.get_source_segment(text, node)
        for node in ast.parse(text).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }
    missing = [name for name in names if name not in found]
    if missing:
        raise KeyError(f"zerobook/{where} defines no {', '.join(missing)}")
    return "\n\n\n".join(found[name] for name in names)


def function_stubs(student_file: str) -> dict[str, bool] | None:
    """Each top-level function (and method of a top-level class, as "Class.method") of the
    student's file -> whether its body is still nbgrader's stub
    (`raise NotImplementedError()`, after an optional docstring); None if the file does not parse
    (the launch reports that, from the rank that imports it)."""
    try:
        tree = ast.parse(
            untrusted.read_text(student_file, run_cache.STUDENT_FILE_BYTES)
        )
    except (OSError, SyntaxError):
        return None
    stub = ast.dump(ast.parse("raise NotImplementedError()").body[0])
    out = {}
    functions = [
        (node.name, node) for node in tree.body if isinstance(node, ast.FunctionDef)
    ]
    functions += [
        (f"{node.name}.{f.name}", f)
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for f in node.body
        if isinstance(f, ast.FunctionDef)
    ]  # a class skeleton's methods
    for name, node in functions:
        body = [
            n
            for n in node.body
            if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
        ]
        out[name] = len(body) == 1 and ast.dump(body[0]) == stub
    return out


def unimplemented(student_file: str) -> list[str]:
    """The student's functions still left as nbgrader's stub."""
    return [name for name, stub in (function_stubs(student_file) or {}).items() if stub]


if __name__ == "__main__":  # the classroom's command, under its older name
    import runpy

    runpy.run_module("zerobook.classroom", run_name="__main__", alter_sys=True)
