"""The memory lab's (Lab 1) visible tests against a careless count."""

import pytest

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
