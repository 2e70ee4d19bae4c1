"""What runs outside Linux: the parts of the set-up a Mac or Windows meets first (issue 43)."""

import os
import subprocess
import sys

from conftest import ROOT


def without_make_flags() -> dict:
    """This environment without what an outer make passes on (`make test WORKERS=4` puts
    WORKERS=4 in MAKEFLAGS, which would set it in the make this test runs)."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    }


# Where the attribute is absent already (a Mac's Python) `del` would raise: pop it, twice, so
# the stand-in runs as it would there (issue 69).
WITHOUT_AFFINITY = "[os.__dict__.pop('sched_getaffinity', None) for _ in range(2)]"


def test_make_counts_its_workers_where_python_has_no_sched_getaffinity(tmp_path):
    """macOS's Python has no os.sched_getaffinity: make's worker count comes from
    os.cpu_count() there (a Python without it, standing in for a Mac's, gives the count)."""
    mac_python = tmp_path / "python3"
    mac_python.write_text(
        "#!/bin/sh\n"  # make runs $(PYTHON) -c CODE: CODE is $2
        f'exec {sys.executable} -c "import os, sys; {WITHOUT_AFFINITY}; '
        'exec(sys.argv[1])" "$2"\n'
    )
    mac_python.chmod(0o755)
    shown = subprocess.run(
        ["make", "-n", "-p", f"PYTHON={mac_python}", "test-quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=without_make_flags(),
    )  # fmt: skip
    workers = [
        line.split(":=")[1].strip()
        for line in shown.stdout.splitlines()
        if line.startswith("WORKERS :=")
    ]
    assert "Traceback" not in shown.stderr, shown.stderr
    assert workers and workers[0].isdigit() and 3 <= int(workers[0]) <= 6, workers


def test_on_windows_torchrun_stops_at_once_saying_use_wsl2_and_how():
    """Windows has no `resource` module, no fork and no process groups: importing the
    launcher works, and a launch stops before anything starts, naming WSL2 and its steps."""
    code = (
        "import sys, psutil  # psutil has its own Windows build\n"
        "sys.modules['resource'] = None  # Windows has no resource module\n"
        "import time, zerobook as zb, zerobook.launcher.launch\n"
        "sys.platform = 'win32'  # after the imports: psutil refuses a platform it lacks\n"
        "start = time.monotonic()\n"
        "try:\n"
        "    zb.torchrun('zerobook.runs.hello', nproc=2)\n"
        "except zb.LaunchError as e:\n"
        "    print(round(time.monotonic() - start, 2), e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seconds, said = done.stdout.split(" ", 1)
    assert float(seconds) < 1.0, seconds
    assert "use WSL2" in said and "wsl --install" in said, said


def test_make_stops_before_downloading_anything_on_a_python_older_than_310(tmp_path):
    """macOS's own python3 is 3.9, which torch 2.13 does not support: make says so and what
    to do, before it makes a virtual environment."""
    old_python = tmp_path / "python3"
    old_python.write_text(
        "#!/bin/sh\n"  # stands for Python 3.9.6: make runs $(PYTHON) -c CODE first
        f'exec {sys.executable} -c "import sys; sys.version_info = (3, 9, 6); '
        'sys.version = \'3.9.6\'; exec(sys.argv[1])" "$2"\n'
    )
    old_python.chmod(0o755)
    venv = tmp_path / "venv"
    done = subprocess.run(
        ["make", "install", f"PYTHON={old_python}", f"VENV={venv}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=without_make_flags(),
    )  # fmt: skip
    assert done.returncode != 0 and not venv.exists()
    assert "needs Python >= 3.10" in done.stderr and "is 3.9.6" in done.stderr, (
        done.stderr
    )


def test_the_workflows_are_valid_github_actions_workflows():
    """The platforms workflow (Linux, macOS, Windows) has not run on GitHub's runners from here:
    it is checked against GitHub's workflow schema (check-jsonschema's copy, offline)."""
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert {p.name for p in workflows} >= {"platforms.yml", "pages.yml"}
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema",
         "vendor.github-workflows", *map(str, workflows)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    text = (ROOT / ".github" / "workflows" / "platforms.yml").read_text()
    for runner in ("ubuntu-24.04", "macos-14", "windows-latest"):
        assert runner in text


def test_the_doctor_colab_run_and_readme_agree_on_the_tested_torch():
    """Issue 69: the doctor called 2.14.1 'not the tested 2.13.0' while make test-colab tests it;
    the doctor's TESTED is the one list, and the Makefile's pin, the Colab-like run's torch and
    the README's say the same."""
    from colab_like import OTHER_TORCH, PINNED

    from zerobook import doctor

    assert list(doctor.TESTED) == [doctor.TESTED_TORCH, OTHER_TORCH]
    assert PINNED == doctor.TESTED_TORCH
    assert f"torch=={doctor.TESTED_TORCH}" in (ROOT / "Makefile").read_text()
    readme = (ROOT / "README.md").read_text()
    assert f"torch {OTHER_TORCH}" in readme
