"""zerobook.labs.untouched in one process: what a student's file could replace in torch is named,
including through the slow lookup its fast path leaves to (a module's class swapped)."""

import math
import types

import pytest
import torch

from zerobook.labs import untouched
from zerobook.trust.report_guard import TamperError


def test_nothing_replaced_is_nothing_named():
    before = untouched.take()
    assert untouched.changed(before) == []


def test_a_tensor_method_replaced_is_named():
    before = untouched.take()
    assert "abs" not in vars(
        torch.Tensor
    )  # torch._C.TensorBase's: a new one shadows it
    torch.Tensor.abs = lambda self: torch.zeros_like(self)
    try:
        with pytest.raises(TamperError, match=r"Tensor\.abs"):
            untouched.check(before)
    finally:
        del torch.Tensor.abs
    assert untouched.changed(before) == []


def test_a_module_function_replaced_or_deleted_is_named():
    before, isclose = untouched.take(), math.isclose
    try:
        math.isclose = lambda *a, **k: True
        assert untouched.changed(before) == ["math.isclose"]
        del math.isclose
        assert untouched.changed(before) == ["math.isclose"]
    finally:
        math.isclose = isclose


def test_a_property_put_on_a_modules_new_class_is_named():
    """`math.__class__ = M` with a property `isclose` on M: math.isclose then answers through
    M, while math's own entry is untouched; only the type's change shows it."""
    before = untouched.take()

    class Liar(types.ModuleType):
        isclose = property(lambda self: lambda *a, **k: True)

    math.__class__ = Liar
    try:
        assert math.isclose(1.0, 2.0)  # the lie works
        assert "math.isclose" in untouched.changed(before)
    finally:
        math.__class__ = types.ModuleType
    assert untouched.changed(before) == []
