"""ruff holds everywhere: the repository formatted and linted under pyproject.toml's config
(its excludes apply: the run starts at the repository root), and the code of every lab's
`%%writefile` cell, which ruff skips inside a notebook (a cell magic), extracted and held to the
same rules, E501 included: the student reads that cell in the notebook."""

import difflib
import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, pyproject

# Labs being rebuilt on another branch, whose findings wait until they land (none now).
IN_PROGRESS = ()
# PATH:ROW:COL: or PATH:cell N:ROW:COL: (the concise report; its summary lines are not findings)
FINDING = re.compile(r"^[\w./-]+:(cell \d+:)?\d+:\d+: ")
LABS = sorted(
    p.parent.name for p in (ROOT / "labs").glob("*/*.ipynb") if p.stem == p.parent.name
)


def ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m ruff ARGS` from the repository root (its pyproject.toml), the ruff of this
    environment (requirements.txt pins it)."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
    )


def findings(result: subprocess.CompletedProcess) -> list[str]:
    """ruff's concise report, one line per finding, less the labs still being rebuilt; ruff's
    own failure (exit 2: a file it cannot read, a bad config) is never filtered away."""
    assert result.returncode in (0, 1), result.stderr
    rebuilt = tuple(f"labs/{lab}/" for lab in IN_PROGRESS)
    found = [line for line in result.stdout.splitlines() if FINDING.match(line)]
    assert found or result.returncode == 0, result.stdout  # a failure it did not name
    return [line for line in found if not line.startswith(rebuilt)]


def test_the_repository_is_formatted():
    result = ruff("format", "--check", "--output-format", "concise", ".")
    unformatted = findings(result)
    assert not unformatted, "run `python -m ruff format` on:\n" + "\n".join(unformatted)


def test_no_source_file_is_kept_out_of_ruff():
    """Only what is not the course's source is excluded (the venv, build output, the generated
    student versions, Markdown); no module is kept out of format or lint to stay under the 300
    lines tests/test_package.py allows a module: a long one is split by idea instead."""
    ruff_config = pyproject()["tool"]["ruff"]
    assert set(ruff_config.get("extend-exclude", [])) <= {
        ".venv",
        "_build",
        "book/labs",
        "*.md",
    }
    for section in ("format", "lint"):
        kept_out = ruff_config.get(section, {}).get("exclude", [])
        assert not kept_out, (
            f"[tool.ruff.{section}] excludes {kept_out}: split them by idea"
        )
    assert "exclude" not in ruff_config


def test_the_repository_passes_ruff_check():
    result = ruff("check", "--output-format", "concise", ".")
    problems = findings(result)
    assert not problems, "\n".join(problems)


def writefile_cells(lab: str) -> list[tuple[str, str]]:
    """(file name, code) of each `%%writefile NAME` cell of the lab's instructor notebook; the
    code as the file ends, with a final newline (a notebook cell's source has none)."""
    notebook = json.loads((ROOT / "labs" / lab / f"{lab}.ipynb").read_text())
    cells = []
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source.startswith("%%writefile "):
            first, _, code = source.partition("\n")
            cells.append((first.split()[1], code + "\n"))
    return cells


@pytest.mark.parametrize(
    "lab",
    [
        pytest.param(
            lab,
            marks=pytest.mark.skip(
                reason="another worker is rebuilding this lab right now"
            ),
        )
        if lab in IN_PROGRESS
        else lab
        for lab in LABS
    ],
)
def test_every_writefile_cell_is_formatted_and_passes_ruff_check(lab):
    cells = writefile_cells(lab)
    assert cells, f"labs/{lab}/{lab}.ipynb has no %%writefile cell"
    for name, code in cells:
        path = f"labs/{lab}/{name}"
        formatted = ruff("format", "--stdin-filename", path, "-", stdin=code)
        assert formatted.returncode == 0, formatted.stderr
        diff = difflib.unified_diff(
            code.splitlines(),
            formatted.stdout.splitlines(),
            "cell",
            "ruff format",
            lineterm="",
        )
        assert formatted.stdout == code, (
            f"{path}: the cell is not formatted\n" + "\n".join(diff)
        )
        # pyproject.toml spares *.py files E501 (modules may keep long comments); a cell is
        # read in the notebook, so the notebooks' rule holds: the exemption is cleared.
        checked = ruff(
            "check",
            "--config",
            "lint.per-file-ignores = {}",
            "--output-format",
            "concise",
            "--stdin-filename",
            path,
            "-",
            stdin=code,
        )
        assert checked.returncode == 0, f"{path}:\n{checked.stdout}{checked.stderr}"
