"""Shared fixtures: where the repository is, and a guard that no test leaves a process behind."""

from collections import Counter
from pathlib import Path

import psutil
import pytest
import xdist_groups

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ROOT / "tests" / "targets"
# make test's first phase hands whole files to its workers (--dist loadfile) in the order
# collected (--no-loadscope-reorder): these, the longest on 2 cores, go first, so that none
# starts when the rest is nearly done (Lab 0's round trip, ~3.5 min, once began last and set
# the phase's length; it is make test-grading's now); then the other files, those with the most
# items first.
LONGEST_FIRST = (
    "tests/test_launch.py",
    "tests/test_launch_fresh.py",
    "tests/test_fresh_notebooks.py",
    "tests/test_capstone_short.py",
    "chapters/zeropp.ipynb",
    "chapters/memory_accounting.ipynb",
    "labs/fsdp2/fsdp2.ipynb",
    "labs/bug_zoo/bug_zoo.ipynb",
    "chapters/scaling_out.ipynb",
)


def pyproject() -> dict:
    """pyproject.toml, read: tomllib (Python 3.11+), or on 3.10 (which the course supports) the
    tomli that pip vendors for itself."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        from pip._vendor import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def pytest_configure(config):
    config.pluginmanager.register(xdist_groups, "zerobook_xdist_groups")


def pytest_collection_modifyitems(items):
    """Files in LONGEST_FIRST's order, then by their number of items (most first); the solved
    labs last, so that most of their launches replay the instructor notebooks' (tests/solved_labs.py)."""
    file_of = lambda item: item.nodeid.split("::")[0]  # noqa: E731
    count = Counter(map(file_of, items))
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    solved = lambda item: "solved_labs/" in file_of(item)  # noqa: E731
    items.sort(
        key=lambda i: (
            solved(i),
            rank.get(file_of(i), len(rank)),
            -count[file_of(i)],
            file_of(i),
        )
    )
    # stable: a file's items keep their order


# A lab part launched by a test (zerobook.grading.run_part) stops after this many seconds, not a
# student's 60: a test machine runs up to five graders and lab launches beside each other, and
# one lab run that takes 7 s alone passed 60 s so in CI (Lab 5's decay_on_1d, stop 58: three
# workers on two cores). No test waits for this limit: hangs are caught by the collective
# timeout (30 s), and grading's own limits (measured from the reference) still apply to classes.
CROWDED_PART_TIMEOUT_S = 300


@pytest.fixture(autouse=True)
def crowded_part_timeout(monkeypatch):
    import zerobook.grading

    monkeypatch.setattr(zerobook.grading, "PART_TIMEOUT_S", CROWDED_PART_TIMEOUT_S)


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


def where_wait_forever_waits(script: Path) -> list[str]:
    """What a timed-out run of tests/targets/wait_forever.py says of where each rank was: rank 0
    in its all_reduce, rank 1 in its sleep (their lines of the script)."""
    lines = script.read_text().splitlines()
    reduce, sleep = (
        1 + next(i for i, line in enumerate(lines) if what in line)
        for what in ("dist.all_reduce(", "time.sleep(")
    )
    return [
        f"rank 0: {script.name}:{reduce} in <module>",
        f"rank 1: {script.name}:{sleep} in <module>",
    ]


@pytest.fixture
def unique_target(tmp_path):
    """Copy a script from tests/targets under a unique path, so its processes can be counted."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        dest.write_text((TARGETS / name).read_text())
        return dest

    return copy
