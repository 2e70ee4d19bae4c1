"""`import zerobook as zb` stays light, and every module is one attribute away (PEP 562)."""
import subprocess
import sys

import pytest

import zerobook as zb
from conftest import ROOT, TARGETS


def test_every_module_and_name_is_reachable_from_zb():
    for name in zb.__all__:
        assert getattr(zb, name) is not None, name
    assert zb.zero.ShardedOptimizer.__name__ == "ShardedOptimizer"
    assert set(zb.__all__) <= set(dir(zb))
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        zb.nonexistent  # noqa: B018


def test_importing_zerobook_loads_neither_torch_nor_the_launcher_nor_matplotlib():
    code = ("import sys, zerobook as zb; heavy = [m for m in ('torch', 'zerobook.launch', 'matplotlib') "
            "if m in sys.modules]; print(heavy); zb.zero.Zero3AdamW; zb.memory.GB; zb.torchrun")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.launch
def test_a_rank_loads_nothing_of_the_notebook_side():
    run = zb.torchrun(TARGETS / "modules.py", nproc=2, echo=False)
    assert [r["loaded"] for r in run.ranks] == [[], []]
