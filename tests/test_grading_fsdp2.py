"""The grading round trip of Lab 5 (production FSDP2): the reference scores full marks and the
untouched release zero. A course directory of its own, so that pytest-xdist can run it beside the
other round trips."""
import pytest

from grading_helpers import part_scores, reference_and_release, round_trip

POINTS = {"fsdp2": {"test_parity": 3, "test_memory": 2, "test_traffic": 2, "test_prefetch": 2, "test_checkpoint": 3}}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    round_trip(root, reference_and_release(POINTS), list(POINTS))
    return part_scores(root, "fsdp2", POINTS["fsdp2"])


def test_reference_scores_full_marks_and_the_release_zero(graded):
    assert graded["reference"] == POINTS["fsdp2"]
    assert graded["untouched"] == {part: 0 for part in POINTS["fsdp2"]}
