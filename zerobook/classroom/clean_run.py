"""A lab's notebook scored clean, and the limits the reference's clean run sets for grading it.

    results = clean_run(labs, "zero3", notebook)   # {grade_id: {"seconds", "launches", "error"?}}
    limits = lab_limits(labs, root, "zero3")       # {"part_s", "cell_s", "submission_s", ...}

`clean_run` runs zerobook.classroom.clean_score in a fresh process (every autograded test of the
course's notebook against the submission's answers; the student's code never runs in the grader);
`lab_limits` times the instructor's own notebook that way, once per version of it, and sets how
long each launch and cell of that lab may take on this machine. The instructor's hidden parameters
(labs/LAB/hidden_params.json) reach the harness through the environment (`hidden_env`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from zerobook.classroom import clean_score
from zerobook.classroom.nbgrader_app import SUBMISSION_TIMEOUT_S
from zerobook.grading import PART_TIMEOUT_ENV
from zerobook.labs.harness import PARAMS_ENV
from zerobook.launcher.dist import DEFAULT_COLLECTIVE_TIMEOUT_S as COLLECTIVE_S

HIDDEN = "hidden_params.json"  # labs/LAB/: the instructor's own values for the harness (never released)
MIN_PART_S = 45  # a launch's limit is never below this: above the collective timeout (30 s), which names a hang
SLACK = 3  # x the reference's slowest launch on this machine (+ a collective timeout: see lab_limits)
CELL_SLACK_S = 30  # a test cell's own work beside its launches


def hidden_env(labs: Path, lab: str) -> dict:
    """The environment that gives lab `lab`'s harness the instructor's hidden parameters
    (labs/LAB/hidden_params.json, a JSON object; see zerobook.labs.harness.lab_params)."""
    path = labs / lab / HIDDEN
    if not path.is_file():
        return {}
    try:
        params = json.loads(path.read_text())
    except ValueError as exc:
        raise SystemExit(f"{path}: not JSON ({exc}); nothing was graded") from None
    if not isinstance(params, dict):
        raise SystemExit(
            f"{path}: a JSON object of the harness's parameters, got {params!r}"
        )
    return {PARAMS_ENV: json.dumps(params)}


def clean_run(
    labs: Path,
    lab: str,
    notebook: Path,
    limits: dict | None = None,
    job: dict | None = None,
) -> dict:
    """zerobook.classroom.clean_score on `notebook`, in a private scratch folder: {grade_id: result};
    limits: {"part_s", "cell_s"} (lab_limits); job: the grading job's environment."""
    env = dict(
        os.environ,
        **(
            {
                PART_TIMEOUT_ENV: str(limits["part_s"]),
                clean_score.CELL_TIMEOUT_ENV: str(limits["cell_s"]),
            }
            if limits
            else {}
        ),
        **(job or {}),
        **hidden_env(labs, lab),
    )
    budget = limits["submission_s"] if limits else SUBMISSION_TIMEOUT_S
    with tempfile.TemporaryDirectory(prefix="zerobook-clean-") as scratch:
        work, result = Path(scratch) / "work", Path(scratch) / "result.json"
        work.mkdir()
        try:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "zerobook.classroom.clean_score",
                    str(labs),
                    lab,
                    str(notebook),
                    str(work),
                    str(result),
                ],
                capture_output=True,
                timeout=budget,
                start_new_session=True,
                env=env,
            )
        except subprocess.TimeoutExpired:
            return {
                "error": f"the clean run took longer than {budget} s (every launch at its limit)"
            }
        return (
            json.loads(result.read_text())
            if result.exists()
            else {"error": "the clean run left no result"}
        )


def limits_version(labs: Path, lab: str) -> str:
    """What lab_limits' cache is keyed by: the instructor's notebook, its hidden parameters
    (a longer schedule takes longer) and the rule (the collective timeout added)."""
    source = (labs / lab / f"{lab}.ipynb").read_bytes()
    hidden = json.dumps(hidden_env(labs, lab)).encode()
    return hashlib.sha256(source + hidden + b"+collective timeout").hexdigest()


def lab_limits(labs: Path, root: Path, lab: str) -> dict:
    """How long a launch and a cell of `lab` may take here: SLACK x the reference's slowest launch
    plus a collective timeout (a rank failing alone leaves its peers waiting that long), at least
    MIN_PART_S; as many as the busiest cell launches, plus CELL_SLACK_S. The reference is timed by a
    clean run of the instructor's notebook, once per `limits_version` (cached in ROOT/limits.json)."""
    cache, source = root / "limits.json", labs / lab / f"{lab}.ipynb"
    known = json.loads(cache.read_text()) if cache.exists() else {}
    version = limits_version(labs, lab)
    if known.get(lab, {}).get("version") == version:
        return known[lab]
    results = clean_run(labs, lab, source)
    failed = {
        k: v["error"]
        for k, v in results.items()
        if isinstance(v, dict) and v.get("error")
    }
    if "error" in results or failed:
        raise SystemExit(
            f"{lab}: the reference solution fails its own tests on this machine: {results.get('error') or failed}"
        )
    per_launch = max(r["seconds"] / max(1, r["launches"]) for r in results.values())
    part = max(MIN_PART_S, SLACK * per_launch + COLLECTIVE_S)
    cell = part * max(max(1, r["launches"]) for r in results.values()) + CELL_SLACK_S
    text = source.read_text()  # every launch in every cell: all of them may hang
    launches = text.count("run_part(") + text.count("run_shared(")
    known[lab] = {
        "version": version,
        "reference_s": round(sum(r["seconds"] for r in results.values()), 1),
        "part_s": round(part),
        "cell_s": round(cell),
        "submission_s": round(part * launches + cell),
    }
    cache.write_text(json.dumps(known, indent=1))
    return known[lab]
