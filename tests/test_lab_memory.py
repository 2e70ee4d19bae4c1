"""The memory lab's (Lab 1) visible tests against a careless count."""

import pytest

from careless.memory import PART1
from lab_helpers import visible_test

# starts ranks with torchrun; the labs' feedback on planted mistakes: make test-grading
pytestmark = [pytest.mark.launch, pytest.mark.slow]


COUNTS_TENSORS = '''
def count_state_bytes(params, grads, optimizer_states):
    """Wrong: sums tensors, so a padded flat buffer's padding (and shared storage) is missed."""
    return {name: sum(t.numel() * t.element_size() for t in tensors)
            for name, tensors in (("params", params), ("grads", grads), ("optimizer", optimizer_states))}
'''


def test_counting_tensors_instead_of_storages_fails_a_visible_test_saying_why(
    tmp_path, monkeypatch
):
    error = visible_test(
        tmp_path, monkeypatch, "memory", "test_measurement", COUNTS_TENSORS
    )
    assert isinstance(error, AssertionError), error
    message = str(error)
    assert (
        message.startswith("flat, rank 0: params counted ")
        and "its storages hold" in message
    )
    assert "a storage holds more than the views you were given" in message


def test_a_stage_counted_wrong_is_named_against_the_paper(tmp_path, monkeypatch):
    """Part 1's visible asserts say which stage, and which call, is off (issue 67: they were
    bare asserts)."""
    from zerobook.accounting import memory

    def bytes_per_rank(psi, stage, world_size, **sizes):
        right = memory.model_state_bytes(psi, stage=stage, world_size=world_size)
        grads = right.grads * (world_size if stage == 2 else 1)  # gradients not sharded
        return {
            "params": right.params,
            "grads": grads,
            "optimizer": right.optimizer,
            "total": right.params + grads + right.optimizer,
        }

    error = visible_test(
        tmp_path,
        monkeypatch,
        "memory",
        "test_accounting",
        "",
        bytes_per_rank=bytes_per_rank,
    )
    assert isinstance(error, AssertionError), error
    assert str(error).startswith("stage 2: ") and "the paper's 16.6 GB" in str(error)


def instructor_cells() -> dict:
    """The instructor notebook's cells by grade_id (hidden tests and solutions in them)."""
    import json

    from conftest import ROOT

    notebook = json.loads((ROOT / "labs" / "memory" / "memory.ipynb").read_text())
    return {
        c["metadata"].get("nbgrader", {}).get("grade_id"): "".join(c["source"])
        for c in notebook["cells"]
    }


def accounting_with(*pairs: str):
    """The Part 1 error (or None) of the reference bytes_per_rank with each (old, new)
    replaced, graded by the instructor's test cell, its hidden tests included."""
    cells = instructor_cells()
    solution = cells["part1_bytes_per_rank"]
    for old, new in zip(pairs[::2], pairs[1::2]):
        assert solution.count(old) == 1, old
        solution = solution.replace(old, new)
    namespace = {"__name__": "__main__"}
    exec(cells["setup"], namespace)
    exec(solution, namespace)
    try:
        exec(cells["test_accounting"], namespace)
    except AssertionError as error:
        return error
    return None


@pytest.mark.parametrize("student", sorted(PART1))
def test_part_1s_careless_mistakes_are_named(student):
    """Part 1's careless class (tests/careless/memory.py, PART1): each fails the
    instructor's test cell, its hidden tests included, naming the stage against the paper
    or the call; the reference passes."""
    pairs, lost, words = PART1[student]
    assert lost == {"test_accounting"}
    assert accounting_with() is None
    error = accounting_with(*pairs)
    assert isinstance(error, AssertionError), error
    assert all(w in str(error) for w in words), str(error)
