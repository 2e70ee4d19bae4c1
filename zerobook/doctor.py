"""`python -m zerobook doctor`: what this machine will do with the course, and what it will not.
What a Mac would be told, by this module's logic (no Mac has run it here):

    platform    Darwin 23.5.0 (arm64)
    python      3.11.7: fine (the course needs >= 3.10)
    torch       2.13.0, CPU build: the version the course is tested with
    GPUs        none: ranks use gloo on CPU tensors
    ranks       each a fresh Python process (torchrun --module; every rank imports torch)
    grading     no sandbox here (bubblewrap is Linux's): the labs and their tests run; an
                instructor grades a class on Linux

Each line is read off this machine (nothing is started but a bubblewrap probe on Linux); `plan()`
returns the same lines for tests. A line that starts with "!" is something that will not work.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys

from zerobook.launcher import start_method

MIN_PYTHON = (3, 10)  # pyproject.toml's requires-python
TESTED_TORCH = "2.13.0"  # the Makefile's pin: everything is tested with it
# torch versions the course is tested with, and how: the one source of truth for the doctor,
# tests/colab_like.py and the README (tests/test_platforms.py checks the three agree)
TESTED = {
    TESTED_TORCH: "the version the course is tested with",
    "2.14.1": "tested by make test-colab (Lab 0 and the launching chapter), not the whole course",
}


def python_line() -> str:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info[:2] < MIN_PYTHON:
        need = ".".join(map(str, MIN_PYTHON))
        return f"! {version}: too old, the course needs Python >= {need} (torch 2.13 does too)"
    return f"{version}: fine (the course needs >= {'.'.join(map(str, MIN_PYTHON))})"


def torch_lines() -> list[tuple[str, str]]:
    """(torch, GPUs): its version and build, and what the ranks will use."""
    if importlib.util.find_spec("torch") is None:
        return [
            (
                "torch",
                f"! not installed: `pip install torch=={TESTED_TORCH}` (README: Where it runs)",
            ),
            ("GPUs", "unknown until torch is installed"),
        ]
    import torch

    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU build"
    tested = TESTED.get(
        torch.__version__.split("+")[0],
        f"not a tested one ({', '.join(TESTED)}): kept (a host's own torch is); "
        "report what breaks",
    )
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not gpus:
        where = "none: ranks use gloo on CPU tensors"
    else:
        names = sorted({torch.cuda.get_device_name(i) for i in range(gpus)})
        where = (
            f"{gpus} ({', '.join(names)}): a run of up to {gpus} ranks uses NCCL, one GPU a rank; "
            "more ranks than GPUs use gloo on CPU tensors"
        )
    if os.environ.get("ZEROBOOK_DEVICE") == "cuda":
        where += (
            " | ! ZEROBOOK_DEVICE=cuda: gloo on CUDA tensors lacks send/recv, and FSDP2 and "
            "sharded checkpoints fail on it: the ring lab and the FSDP2 pages will not run"
        )
    return [("torch", f"{torch.__version__}, {build}: {tested}"), ("GPUs", where)]


def ranks_line() -> str:
    if sys.platform == "win32":
        return "! zb.torchrun does not start ranks on Windows: use WSL2 (`wsl --install -d Ubuntu`)"
    try:
        return start_method.described(start_method.chosen())
    except ValueError as error:
        return f"! {error}"


def grading_line() -> str:
    """Whether bubblewrap, grading's sandbox, runs here (its own probe: the classroom, which
    checks its full sandbox before it grades, is called by nothing)."""
    if not sys.platform.startswith("linux"):
        return (
            "no sandbox here (bubblewrap is Linux's): the labs and their tests run; an instructor "
            "grades a class on Linux"
        )
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return "! bubblewrap is not installed: students' labs run, a class cannot be graded here"
    probe = [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true"]
    done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    if done.returncode:
        return f"! bubblewrap cannot make a sandbox here: {done.stderr.strip()[-200:]}"
    return "bubblewrap runs: a class can be graded here (the grader checks its whole sandbox first)"


def plan() -> list[tuple[str, str]]:
    system = f"{platform.system()} {platform.release()} ({platform.machine()})"
    if "microsoft" in platform.release().lower():
        system += ": WSL2, the Linux path"
    return [
        ("platform", system),
        ("python", python_line()),
        *torch_lines(),
        ("ranks", ranks_line()),
        ("grading", grading_line()),
    ]


def main() -> int:
    lines = plan()
    for name, text in lines:
        print(f"{name:<10}  {text}")
    broken = [name for name, text in lines if text.startswith("!") or " | !" in text]
    print("\nwill not work here: " + ", ".join(broken) if broken else "\nall set")
    return 1 if broken else 0
