"""`python -m zerobook doctor` prints this machine's plan, and names what will not work."""

import os
import subprocess
import sys

from zerobook import doctor
from zerobook.launcher import start_method


def doctor_says(tmp_path, **env) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "zerobook", "doctor"],
        cwd=tmp_path,  # from any folder
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout


def test_the_doctor_prints_the_plan_read_off_this_machine(tmp_path):
    import torch

    code, out = doctor_says(tmp_path, ZEROBOOK_START="fresh")
    lines = dict(line.split(None, 1) for line in out.splitlines() if line[:1].isalpha())
    assert set(lines) >= {"platform", "python", "torch", "GPUs", "ranks", "grading"}
    assert lines["torch"].startswith(torch.__version__)
    assert ("CUDA" in lines["torch"]) == bool(torch.version.cuda)
    assert lines["ranks"] == start_method.described("fresh")
    assert (code == 0) == ("all set" in out)


def test_what_will_not_work_is_named_with_what_to_do(tmp_path, monkeypatch):
    code, out = doctor_says(tmp_path, ZEROBOOK_START="spawn")
    assert code == 1 and "will not work here: ranks" in out
    assert "'spawn': use 'fork' (Linux) or 'fresh'" in out
    monkeypatch.setattr(sys, "version_info", (3, 9, 6))
    assert doctor.python_line().startswith("! 3.9.6: too old")
    monkeypatch.setattr(sys, "platform", "win32")
    assert "use WSL2" in doctor.ranks_line()
