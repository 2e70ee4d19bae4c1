"""What a failed step reports of the student's exception (zerobook.labs.crash.failure): Python's
and torch's words whole, with the student's line; an exception the student's own `raise` or
`assert` made by its type and their line only (issue 64: a message of theirs could carry a
hidden input or parameter into the feedback)."""

import pytest

from zerobook.labs import crash

STUDENT = """
import torch


def raises(secret):
    raise ValueError(f"the hidden cap is {secret}")


def asserts(secret):
    assert secret < 0, f"the hidden cap is {secret}"


def mismatched(secret):
    return torch.ones(3) + torch.ones(4)
"""


@pytest.mark.parametrize(
    "name, kept",
    [
        ("raises", "ValueError, raised by your code"),
        ("asserts", "AssertionError, raised by your code"),
        ("mismatched", "RuntimeError: The size of tensor a (3) must match"),
    ],
)
def test_a_students_own_message_is_not_reported_but_their_line_is(tmp_path, name, kept):
    path = tmp_path / "ddp_student.py"
    path.write_text(STUDENT)
    namespace = {}
    exec(compile(STUDENT, str(path), "exec"), namespace)
    with pytest.raises(Exception) as raised:
        namespace[name](8192)
    failed = crash.failure(raised.value, 0, 1, str(path))
    assert failed["error"].startswith(kept) and "8192" not in failed["error"]
    assert failed["where"]["function"] == name
    assert f"ddp_student.py, line {failed['where']['line']}" in crash.describe(failed)
