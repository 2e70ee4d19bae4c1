"""Asynchronous collectives held until wait() (tests/targets/inflight_held.py, 3 ranks)."""

import math

import pytest

import zerobook as zb
from conftest import TARGETS

pytestmark = pytest.mark.launch


def test_reduce_scatter_and_all_gather_land_only_at_wait():
    run = zb.torchrun(TARGETS / "inflight_held.py", nproc=3, echo=False)
    n = len(run.ranks)
    total = [sum(float(e + 10 * r) for r in range(n)) for e in range(2 * n)]
    for rank, report in enumerate(run.ranks):
        in_flight = report["before_rs"] + report["before_ag"]  # no part defined yet
        assert len(in_flight) == 2 + 2 * n and all(math.isnan(x) for x in in_flight)
        assert report["shard"] == total[2 * rank : 2 * rank + 2]
        assert report["gathered"] == report["blocking"] == report["inplace"] == total
        assert report["events"] == [
            ["reduce_scatter_tensor", 0, True], ["wait", 0],
            ["all_gather_into_tensor", 1, True], ["wait", 1],
            ["all_gather_into_tensor", 2, False],
            ["all_gather_into_tensor", 3, True], ["wait", 3],
        ]  # fmt: skip
