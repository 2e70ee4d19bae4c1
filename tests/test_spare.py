"""The one process a confined rank may have started (zerobook.trust.spare): it runs Lab 6's
checkpoint reader on paths in the harness's folder, and nothing else."""

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT
from zerobook.trust import spare

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="graded ranks are Linux's"
)


def test_only_paths_in_one_folder_the_harness_made_are_read(tmp_path):
    made = Path(tempfile.mkdtemp(prefix=spare.PREFIX))
    inside = [str(made / name) for name in ("ckpt", "shifted", "readback.json")]
    assert spare.allowed(inside)
    assert not spare.allowed(inside[:2])
    assert not spare.allowed([*inside[:2], str(tmp_path / "readback.json")])
    assert not spare.allowed([str(made / "ckpt" / ".." / ".." / "x")] * 3)
    other = Path(tempfile.mkdtemp(prefix="other-"))
    assert not spare.allowed([str(other / "a")] * 3)
    assert not spare.allowed(["a", 1, None]) and not spare.allowed("ckpt")


ASK = """
import json, sys, tempfile
from pathlib import Path
from zerobook.trust import spare
spare.keep_for("zerobook.labs.fsdp2", 0)
paths = json.loads(sys.argv[1])
spare.ask(*paths)
print(json.dumps(spare.answer(60)))
"""


def ask(paths) -> int | None:
    """A process that kept a spare asks it to read `paths`: the reader's exit code."""
    said = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(ASK), json.dumps(paths)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert said.returncode == 0, said.stderr
    return json.loads(said.stdout)


def test_the_spare_runs_the_reader_and_refuses_other_paths(tmp_path):
    assert ask([str(tmp_path / n) for n in ("a", "b", "c")]) == -1  # nothing run
    made = Path(tempfile.mkdtemp(prefix=spare.PREFIX))
    paths = [str(made / n) for n in ("ckpt", "shifted", "readback.json")]
    assert ask(paths) == 0  # the reader ran: no checkpoint there, and it says so
    said = json.loads((made / "readback.json").read_text())
    assert said["error"].startswith("not a DCP checkpoint a fresh process can read")
