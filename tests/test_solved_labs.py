"""The solved labs that nbval runs beside the instructor notebooks (tests/solved_labs.py): each is
the student's release with the reference filled in, and each launch of the two runs once."""

import json

import pytest

from conftest import ROOT
from solved_labs import is_lab_notebook, solved_version
from zerobook import run_cache
from zerobook.classroom.release import lab_names
from zerobook.launcher.launch import LaunchError, RunResult

LABS = ROOT / "labs"


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


@pytest.mark.parametrize("lab", lab_names(LABS))
def test_a_solved_lab_is_the_release_with_the_reference_in_it(lab):
    """Every cell the release hands out, in its order; the solution cells hold the instructor's
    source (the rank script the same bytes: the two notebooks' launches are one); no stub and no
    hidden test."""
    import nbformat

    from zerobook.classroom.release import student_version

    solved, released = solved_version(LABS, lab), student_version(LABS, lab)
    instructor = nbformat.read(LABS / lab / f"{lab}.ipynb", as_version=4)
    reference = {grade_id(c): c.source for c in instructor.cells}
    assert [grade_id(c) for c in solved.cells] == [grade_id(c) for c in released.cells]
    for mine, theirs in zip(solved.cells, released.cells):
        if mine.metadata.get("nbgrader", {}).get("solution"):
            assert mine.source == reference[grade_id(mine)], grade_id(mine)
        else:
            assert mine.source == theirs.source
    text = "\n".join(c.source for c in solved.cells)
    for left in ("YOUR CODE HERE", "YOUR ANSWER HERE", "BEGIN HIDDEN TESTS"):
        assert left not in text, (lab, left)


def test_the_plugin_gives_the_run_cache_to_the_lab_notebooks_alone():
    assert is_lab_notebook(ROOT / "labs" / "ddp" / "ddp.ipynb")
    assert is_lab_notebook(ROOT / "_build" / "solved_labs" / "ddp" / "ddp.ipynb")
    assert not is_lab_notebook(ROOT / "chapters" / "zero3.ipynb")
    assert not is_lab_notebook(ROOT / "book" / "labs" / "ddp.ipynb")


def test_a_shared_run_cache_launches_once_and_replays_after(tmp_path, monkeypatch):
    """WRITE_ENV=new: the first launch of a key runs and is recorded, the next replays it (its
    failure too); WRITE_ENV=1, the clean run's, launches always; unset, the kernel's, never
    records."""
    monkeypatch.setenv(run_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(run_cache.WRITE_ENV, run_cache.NEW)
    launched = []

    def launch(result):
        def run():
            launched.append(result)
            if isinstance(result, Exception):
                raise result
            return result

        return lambda: run_cache.replay("k") or run_cache.record("k", run)

    ran = RunResult(ranks=[{"rank": 0}], log="[rank0] hi", seconds=1.5)
    assert launch(ran)().ranks == [{"rank": 0}] and len(launched) == 1
    again = launch(RunResult(ranks=[{"rank": 9}], log="", seconds=0))()
    assert again.ranks == [{"rank": 0}] and again.log == ran.log and len(launched) == 1
    assert [p.name for p in tmp_path.iterdir()] == [
        "k.json"
    ]  # no half-written file left
    monkeypatch.setenv(run_cache.WRITE_ENV, "1")
    assert launch(ran)() is ran and len(launched) == 2
    (tmp_path / "k.json").unlink()
    monkeypatch.setenv(run_cache.WRITE_ENV, run_cache.NEW)
    with pytest.raises(LaunchError, match="rank 1 failed"):
        launch(LaunchError("rank 1 failed", log="..."))()
    with pytest.raises(LaunchError, match="rank 1 failed"):
        launch(ran)()
    assert len(launched) == 3
    assert json.loads((tmp_path / "k.json").read_text())["error"] == "rank 1 failed"
    monkeypatch.delenv(run_cache.WRITE_ENV)
    (tmp_path / "k.json").unlink()
    assert launch(ran)() is ran and not list(tmp_path.iterdir())


def test_the_run_cache_never_keys_a_zygote():
    """Its variables are the kernel's, read as each launch starts: a kernel with them still gets
    the zygote a kernel without them would (zerobook.launcher.supervisor.PER_RUN, and the test
    kernels' tests/kernel_preload.PER_KERNEL)."""
    from kernel_preload import PER_KERNEL
    from zerobook.launcher.supervisor import PER_RUN

    assert {run_cache.CACHE_ENV, run_cache.WRITE_ENV} <= PER_RUN & PER_KERNEL
