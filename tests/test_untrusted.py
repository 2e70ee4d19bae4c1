"""zerobook.trust.untrusted: what the trusted side reads after a sandbox exits is a regular file it
opened without following a link, of bounded size; what it writes there is a new file. And its
users: the launcher's reading of a run's files, grading's check of a submitted folder, the
clean run's rank script."""

import json
import os
import threading
import time

import pytest

from zerobook.trust import untrusted
from zerobook.trust.untrusted import UntrustedFile


def read_within(path, limit, seconds=5.0):
    """untrusted.read_bytes(path, limit) in a thread: what it returned or raised, or a
    failure if it has not returned within `seconds` (a FIFO must not block)."""
    done = {}

    def run():
        try:
            done["value"] = untrusted.read_bytes(path, limit)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            done["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert done, f"reading {path} did not return within {seconds} s"
    return done


def test_a_regular_file_is_read_whole(tmp_path):
    (tmp_path / "rank0.json").write_text('{"total": 10}')
    assert untrusted.read_json(tmp_path / "rank0.json", 100) == {"total": 10}
    assert untrusted.read_text(tmp_path / "rank0.json", 13) == '{"total": 10}'


@pytest.mark.parametrize("target", ["secret.txt", "/dev/zero", "/proc/self/fd/1"])
def test_a_link_is_never_followed(tmp_path, target):
    (tmp_path / "secret.txt").write_text("the instructor's solution")
    os.symlink(target, tmp_path / "rank0.json")
    done = read_within(tmp_path / "rank0.json", 2**20)
    assert isinstance(done.get("error"), UntrustedFile), done
    assert "a symbolic link, not a regular file" in str(done["error"])


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "rank0.json")
    started = time.monotonic()
    done = read_within(tmp_path / "rank0.json", 2**20)
    assert "a FIFO, not a regular file" in str(done.get("error")), done
    assert time.monotonic() - started < 1


def test_a_device_a_folder_and_a_file_too_large_are_refused(tmp_path):
    (tmp_path / "big.json").write_bytes(b"x" * 101)
    (tmp_path / "folder").mkdir()
    for path, says in (
        ("/dev/zero", "a character device"),
        (tmp_path / "folder", "a folder"),
        (tmp_path / "big.json", "larger than 100 bytes"),
    ):
        with pytest.raises(UntrustedFile, match=says):
            untrusted.read_bytes(path, 100)
    assert untrusted.read_bytes(tmp_path / "big.json", 101) == b"x" * 101


@pytest.mark.parametrize("swap_in", ["a link", "another file"])
def test_a_file_replaced_between_its_check_and_its_opening_is_refused(
    tmp_path, monkeypatch, swap_in
):
    """lstat saw a regular file; by the open, a link (O_NOFOLLOW refuses it) or another file
    (fstat sees another inode) has taken its place."""
    report, real_open = tmp_path / "rank0.json", os.open
    report.write_text("{}")

    def swapped(path, flags, *args):
        if swap_in == "a link":
            os.symlink("/dev/zero", tmp_path / "zero")
        else:
            (tmp_path / "zero").write_text("[]")
        os.replace(tmp_path / "zero", report)
        return real_open(path, flags, *args)

    monkeypatch.setattr(untrusted.os, "open", swapped)
    with pytest.raises(UntrustedFile, match="replaced while being opened"):
        untrusted.read_bytes(report, 100)


def test_writing_fresh_removes_a_planted_link_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim.ipynb"
    victim.write_text("the victim's notebook")
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(victim, work / "setup_check_student.py")
    untrusted.write_fresh(work / "setup_check_student.py", "def f(): pass\n")
    assert victim.read_text() == "the victim's notebook"
    assert not (work / "setup_check_student.py").is_symlink()
    assert (work / "setup_check_student.py").read_text() == "def f(): pass\n"
    (work / "a_folder").mkdir()
    with pytest.raises(UntrustedFile, match="a folder"):
        untrusted.write_fresh(work / "a_folder", "x")


def test_the_rank_script_is_never_written_through_a_planted_link(tmp_path):
    """clean_score.write_rank_script writes into the folder the student's function server
    can write: a link planted there is replaced, its target untouched."""
    from zerobook.classroom.clean_score import write_rank_script

    victim = tmp_path / "gradebook.db"
    victim.write_bytes(b"SQLite format 3\x00")
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(victim, work / "ring_student.py")
    write_rank_script("%%writefile ring_student.py\nx = 1", work)
    assert victim.read_bytes() == b"SQLite format 3\x00"
    assert (work / "ring_student.py").read_text() == "x = 1\n"


def test_a_tree_of_folders_and_regular_files_within_its_bounds_passes(tmp_path):
    (tmp_path / "lab" / "data").mkdir(parents=True)
    (tmp_path / "lab" / "lab.ipynb").write_text("{}")
    (tmp_path / "lab" / "data" / "notes.txt").write_text("mine")
    assert untrusted.tree_problem(tmp_path / "lab", max_bytes=6, max_files=2) is None
    assert "more than 1 files" in untrusted.tree_problem(
        tmp_path / "lab", max_bytes=6, max_files=1
    )
    assert "more than 5 bytes" in untrusted.tree_problem(
        tmp_path / "lab", max_bytes=5, max_files=2
    )


@pytest.mark.parametrize(
    "plant, says",
    [
        (lambda p: os.symlink("/dev/zero", p), "a symbolic link"),
        (lambda p: os.symlink("../../labs/lab.ipynb", p), "a symbolic link"),
        (os.mkfifo, "a FIFO"),
    ],
)
def test_a_tree_holding_anything_else_is_named(tmp_path, plant, says):
    (tmp_path / "lab" / "data").mkdir(parents=True)
    (tmp_path / "lab" / "lab.ipynb").write_text("{}")
    plant(tmp_path / "lab" / "data" / "extra")
    why = untrusted.tree_problem(tmp_path / "lab", max_bytes=2**20, max_files=10)
    assert why == f"lab/data/extra is {says}"


def test_a_tree_that_is_itself_a_link_is_named(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "lab")
    why = untrusted.tree_problem(tmp_path / "lab", max_bytes=2**20, max_files=10)
    assert why == "lab is a symbolic link, not a folder"


def test_a_tree_is_copied_file_by_file_and_a_link_in_it_is_refused(tmp_path):
    (tmp_path / "lab" / "data").mkdir(parents=True)
    (tmp_path / "lab" / "lab.ipynb").write_text("{}")
    (tmp_path / "lab" / "data" / "notes.txt").write_text("mine")
    untrusted.copy_tree(tmp_path / "lab", tmp_path / "copy")
    assert (tmp_path / "copy" / "data" / "notes.txt").read_text() == "mine"
    assert (tmp_path / "copy" / "lab.ipynb").read_text() == "{}"
    os.symlink("/dev/zero", tmp_path / "lab" / "zero")
    with pytest.raises(UntrustedFile, match="a symbolic link"):
        untrusted.copy_tree(tmp_path / "lab", tmp_path / "copy2")


def test_the_launcher_refuses_a_report_or_a_record_that_is_not_a_regular_file(tmp_path):
    """Another rank replaced rank 0's report by a link to /dev/zero after rank 0 finished,
    and left a FIFO as a failure record: the launcher says so at once, reading nothing."""
    from zerobook.launcher.failures import (
        REPORT_BYTES,
        LaunchError,
        raise_if_failed,
        read_json,
    )
    from zerobook.launcher.rank_output import RankOutput

    os.symlink("/dev/zero", tmp_path / "rank0.json")
    with pytest.raises(
        LaunchError, match="rank0.json cannot be trusted: .*symbolic link"
    ):
        read_json(tmp_path / "rank0.json", REPORT_BYTES)
    os.mkfifo(tmp_path / "rank1.error.json")
    with pytest.raises(LaunchError, match="rank1.error.json cannot be trusted: .*FIFO"):
        raise_if_failed(str(tmp_path), RankOutput(echo=False), "target")


def test_the_launcher_refuses_a_finish_mark_that_is_too_large(tmp_path):
    from zerobook.launcher.failures import DONE_BYTES, LaunchError, raise_if_unfinished
    from zerobook.launcher.rank_output import RankOutput

    (tmp_path / "rank0.json").write_text("{}")
    (tmp_path / "rank0.done").write_text("0" * (DONE_BYTES + 1))
    with pytest.raises(
        LaunchError, match="rank0.done cannot be trusted: .*larger than"
    ):
        raise_if_unfinished(
            str(tmp_path), {0: {"token"}}, RankOutput(echo=False), "target"
        )


def test_the_run_cache_key_reads_no_link(tmp_path):
    """A rank (or the function server) may replace the student's file by a link (to
    /dev/zero, to a file of the course) before the next part: the key of that launch is made
    without reading through it."""
    from zerobook import run_cache

    student = tmp_path / "setup_check_student.py"
    student.write_text("x = 1\n")
    key = lambda: run_cache.key("setup_check", str(student), "gather", 4, {})
    first = key()
    student.unlink()
    keys = []
    for target, text in (("a.py", "x = 2\n"), ("b.py", "x = 3\n")):
        (tmp_path / target).write_text(text)
        os.symlink(tmp_path / target, tmp_path / "link")
        os.replace(tmp_path / "link", student)
        keys.append(key())
    assert keys[0] == keys[1] != first  # nothing read through the link


PLANTS_A_LINK = """
import os, time
import zerobook as zb

me = zb.setup(verbose=False)
zb.report(rank=me.rank)
folder = os.environ["ZEROBOOK_REPORT_DIR"]
if me.rank == 1:  # once rank 0 has finished, its report becomes a link to /dev/zero
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(folder, "rank0.done")):
        assert time.monotonic() < deadline, "rank 0 never finished"
        time.sleep(0.05)
    os.symlink("/dev/zero", os.path.join(folder, "zero"))
    os.replace(os.path.join(folder, "zero"), os.path.join(folder, "rank0.json"))
"""


@pytest.mark.launch
def test_a_rank_that_links_a_finished_ranks_report_to_dev_zero_fails_the_launch(
    tmp_path,
):
    """The launcher reads each report after every rank has exited: one that is a link (here
    to /dev/zero, which read whole would exhaust the host's memory) fails the launch at once."""
    import zerobook as zb

    script = tmp_path / "plants_a_link.py"
    script.write_text(PLANTS_A_LINK)
    started = time.monotonic()
    with pytest.raises(zb.LaunchError, match="rank0.json cannot be trusted"):
        zb.torchrun(str(script), nproc=2, timeout=120, echo=False)
    assert time.monotonic() - started < 120


def submitted_course(tmp_path, plant=None):
    """A course directory with one submission of lab `lab`, `plant(folder)` done in it."""
    folder = tmp_path / "submitted" / "student" / "lab"
    folder.mkdir(parents=True)
    (folder / "lab.ipynb").write_text(json.dumps({"cells": []}))
    if plant:
        plant(folder)
    return tmp_path


def test_a_submitted_folder_of_regular_files_can_be_graded(tmp_path):
    from zerobook.classroom.submissions import submission_problem, submitted

    root = submitted_course(tmp_path)
    assert submission_problem(root, "lab", "student") is None
    assert submitted(root) == {"lab": ["student"]}


@pytest.mark.parametrize(
    "plant, says",
    [
        (lambda f: os.symlink("/dev/zero", f / "data"), "lab/data is a symbolic link"),
        (lambda f: os.mkfifo(f / "data"), "lab/data is a FIFO"),
        (
            lambda f: (
                (f / "lab.ipynb").unlink()
                or os.symlink("/labs/lab/lab.ipynb", f / "lab.ipynb")
            ),
            "lab/lab.ipynb is a symbolic link",
        ),
    ],
)
def test_a_submitted_folder_holding_anything_else_is_not_graded_naming_it(
    tmp_path, plant, says
):
    """Checked with lstat before anything reads it (submissions.digest, the clean run, nbgrader's
    autograde, which copies following links)."""
    from zerobook.classroom import submissions

    root = submitted_course(tmp_path, plant)
    why = submissions.submission_problem(root, "lab", "student")
    assert why.startswith("submit regular files only") and why.endswith(says), why
    digest = submissions.digest  # made from the reason, reading nothing of the folder
    labs = tmp_path / "labs" / "lab"
    labs.mkdir(parents=True)
    (labs / "lab.ipynb").write_text("{}")
    assert digest(tmp_path / "labs", root, "lab", "student")


def test_a_submitted_folder_that_is_a_link_or_too_big_is_not_graded(
    tmp_path, monkeypatch
):
    from zerobook.classroom import submissions

    root = submitted_course(tmp_path)
    os.symlink(root / "submitted" / "student", root / "submitted" / "copycat")
    assert submissions.submitted(root) == {"lab": ["copycat", "student"]}
    assert submissions.submission_problem(root, "lab", "copycat").endswith(
        "copycat is a symbolic link"
    )
    monkeypatch.setattr(submissions, "SUBMISSION_BYTES", 10)
    assert "holds more than 10 bytes" in submissions.submission_problem(
        root, "lab", "student"
    )
