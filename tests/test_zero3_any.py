"""Our ZeRO-3 with the layouts and optimizers a PyTorch user brings: 16-bit units beside an fp32
root, and any torch.optim optimizer over the shards (tests/targets/zero3_any.py)."""

import pytest
import torch

import zerobook as zb
from conftest import TARGETS

pytestmark = pytest.mark.launch


def test_units_keep_their_dtype_and_any_optimizer_steps_the_shards():
    run = zb.torchrun(TARGETS / "zero3_any.py", nproc=3, echo=False)
    for report in run.ranks:
        for dtype in ("bfloat16", "float16"):
            assert report[dtype]["diff"] == 0.0, (
                dtype
            )  # DDP's bits, every sum in rank order
            units = report[dtype]["units"]
            assert units.pop("root") == "torch.float32" and set(units.values()) == {
                f"torch.{dtype}"
            }
        assert report["sgd"]["diff"] == report["adamw"]["diff"] == 0.0


def test_a_unit_that_mixes_dtypes_says_how_to_split_it(monkeypatch):
    from zerobook.zero.units import Unit

    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: 0)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 1)
    params = [
        torch.nn.Parameter(torch.ones(2)),
        torch.nn.Parameter(torch.ones(2, dtype=torch.bfloat16)),
    ]
    with pytest.raises(ValueError, match="unit 'root' mixes dtypes .*own unit"):
        Unit("root", params)
