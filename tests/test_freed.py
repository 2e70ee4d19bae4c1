"""Freed storage is named before torch reads it (zerobook.labs.freed), and a student's failure is
told with the student's own line (zerobook.labs.crash): in one process, no ranks."""

import pytest
import torch

from zerobook.labs.freed import (
    FreedGuard,
    FreedStorage,
    freed,
    readable,
    rebound,
    storage_key,
)
from zerobook.labs import crash


def freed_linear():
    """A Linear whose weight forward saved, then freed as ZeRO-3 frees it."""
    layer = torch.nn.Linear(4, 4)
    return layer, layer.weight


def test_a_storage_resized_to_nothing_is_freed_and_its_view_too():
    layer, weight = freed_linear()
    assert not freed(weight) and not freed(torch.empty(0))
    weight.untyped_storage().resize_(0)
    assert freed(weight) and freed(weight.data) and not freed(layer.bias)
    with pytest.raises(FreedStorage, match="w's storage was freed .* when it was read"):
        readable(weight, "w")


@pytest.mark.parametrize("where", ["forward", "backward", "copy into it"])
def test_the_guard_names_the_weight_in_forward_backward_and_a_copy(where):
    """Each would read or write memory that is no longer the tensor's (a SIGSEGV, or
    silent garbage): the guard raises first, naming the parameter and the phase."""
    layer, weight = freed_linear()
    with FreedGuard({weight: "blocks.2.w"}, at=f"step 1, {where}") as guard:
        loss = layer(torch.randn(2, 4, requires_grad=True)).sum()
        weight.untyped_storage().resize_(0)
        assert weight.data.shape == (4, 4)  # metadata only: allowed
        act = {
            "forward": lambda: layer(torch.randn(2, 4)),
            "backward": loss.backward,
            "copy into it": lambda: weight.data.copy_(torch.ones(4, 4)),
        }[where]
        with pytest.raises(
            FreedStorage, match=f"blocks.2.w was used .* step 1, {where}"
        ):
            act()
        weight.untyped_storage().resize_(64)  # gathered again: allowed again
        weight.data.copy_(torch.ones(4, 4))
        assert layer(torch.ones(1, 4)).sum().item() == pytest.approx(
            16 + layer.bias.sum().item()
        )
    assert guard.at == f"step 1, {where}"


def test_a_rebound_data_is_named_a_resized_storage_is_not():
    model = torch.nn.Linear(3, 3)
    storages = {name: storage_key(p) for name, p in model.named_parameters()}
    model.weight.untyped_storage().resize_(0)
    rebound(model, storages)  # the same storage, resized: how ZeRO-3 frees
    model.weight.data = torch.empty(0)
    with pytest.raises(
        RuntimeError, match=r"weight's .data was rebound .*shape now \[0\]"
    ):
        rebound(model, storages)


def test_a_failure_shows_the_students_innermost_line_through_a_reraise(tmp_path):
    """The student's frame is found through `raise ... from exc` (the harness's own
    wrapping), cut to the file's name; a KeyError of a tensor is told by its shape."""
    student = tmp_path / "zero3_student.py"
    student.write_text("def hook(table, key):\n    return table[key]\n")
    namespace = {}
    exec(compile(student.read_text(), str(student), "exec"), namespace)
    try:
        try:
            namespace["hook"]({}, torch.zeros(32))
        except KeyError as exc:
            raise RuntimeError("the harness's words") from exc
    except RuntimeError as exc:
        record = crash.failure(exc.__cause__, 2, 1, str(student), "likely this")
        where = crash.student_frame(exc, str(student))
    assert where == {"file": "zero3_student.py", "line": 2, "source": "return table[key]",
                     "function": "hook"}  # fmt: skip
    assert record["error"] == "KeyError: a tensor of shape [32]"
    assert crash.describe(record) == (
        "the run failed at step 2, rank 1: zero3_student.py, line 2, in hook: "
        "`return table[key]`: KeyError: a tensor of shape [32]\n  likely: likely this"
    )
    assert not record["lost_peer"]
    lost = crash.failure(RuntimeError("Connection closed by peer"), 2, 0, str(student))
    assert lost["lost_peer"] and lost["where"] is None


def test_the_lighter_guard_checks_python_calls_only_while_on_and_units_at_their_edges():
    """FreedCalls (the capstone's): off, a freed weight passes through untouched (so the
    run's other methods are not checked); on, a copy into it is named. guard_units:
    a unit's forward, and its backward, find its weights freed and say which."""
    from zerobook.labs.freed import FreedCalls, guard_units

    layer, weight = freed_linear()
    names = {id(weight): "blocks.0.w", id(layer.bias): "blocks.0.b"}
    guard_units({"blocks.0": (layer, [weight, layer.bias])}, names)
    with FreedCalls({weight: "blocks.0.w"}) as calls:
        loss = layer(torch.randn(2, 4, requires_grad=True)).sum()
        weight.untyped_storage().resize_(0)
        weight.data.untyped_storage()  # metadata: passes, on or off
        with pytest.raises(
            FreedStorage, match=r"blocks.0.w's storage .* by backward \(blocks.0's\)"
        ):
            loss.backward()
        calls.on = True
        with pytest.raises(FreedStorage, match=r"blocks.0.w was used \(by copy_\)"):
            weight.data.copy_(torch.ones(4, 4))
        with pytest.raises(
            FreedStorage, match="blocks.0.w's storage .* about to compute"
        ):
            layer(torch.ones(1, 4))
