"""The lab harnesses' guards, in this process (no ranks): tests that share a run launch it
once. (What the student's file may import and use: tests/test_policy.py.)"""

import pytest


def test_tests_that_share_a_run_launch_it_once_until_its_file_is_written_again(
    tmp_path, monkeypatch
):
    """grading.run_shared: one launch (or one failure) for every test that reads it; running the
    cell that writes the student's file again launches again."""
    import os

    from zerobook import grading

    launches = []

    def launch(lab, student_file, part, nproc=4, **options):
        launches.append(part)
        raise RuntimeError("the student's code raised")

    monkeypatch.setattr(grading, "run_part", launch)
    student = tmp_path / "ddp_student.py"
    student.write_text("x = 1\n")
    for _ in range(3):
        with pytest.raises(RuntimeError, match="the student's code raised"):
            grading.run_shared("ddp", str(student), "train", nproc=3)
    assert launches == ["train"]
    student.write_text("x = 1\n")
    os.utime(
        student, ns=(0, student.stat().st_mtime_ns + 1)
    )  # however coarse the clock
    with pytest.raises(RuntimeError):
        grading.run_shared("ddp", str(student), "train", nproc=3)
    assert launches == ["train", "train"]
