"""The grading round trip of Labs 3 and 4 (ZeRO-1/2 and ZeRO-3): the reference scores full marks
and the untouched release zero. A course directory of its own, so that pytest-xdist can run it
beside tests/test_grading.py."""
import pytest

from grading_helpers import part_scores, reference_and_release, round_trip

POINTS = {
    "zero": {"test_parity": 4, "test_memory": 3, "test_traffic": 2},
    "zero3": {"test_parity": 3, "test_memory": 3, "test_traffic": 2, "test_order": 2},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    round_trip(root, reference_and_release(POINTS), list(POINTS))
    return {lab: part_scores(root, lab, points) for lab, points in POINTS.items()}


@pytest.mark.parametrize("lab", sorted(POINTS))
def test_reference_scores_full_marks_and_the_release_zero(graded, lab):
    assert graded[lab]["reference"] == POINTS[lab]
    assert graded[lab]["untouched"] == {part: 0 for part in POINTS[lab]}
