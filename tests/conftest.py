"""Shared fixtures: where the repository is, and a guard that no test leaves a process behind."""

from pathlib import Path

import psutil
import pytest
from xdist_groups import pytest_collection_modifyitems  # noqa: F401 (xdist_group on pytest 9)

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ROOT / "tests" / "targets"


def processes_running(marker: str) -> list[psutil.Process]:
    """Every live process whose command line mentions `marker` (a unique path of one test)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and marker in " ".join(
                p.info["cmdline"] or []
            ):
                found.append(p)
        except psutil.Error:
            pass
    return found


@pytest.fixture
def unique_target(tmp_path):
    """Copy a script from tests/targets under a unique path, so its processes can be counted."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        dest.write_text((TARGETS / name).read_text())
        return dest

    return copy
