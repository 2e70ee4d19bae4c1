"""Ring collectives from send/recv, and the traffic meter, on real ranks. (The ring's trace and the
parameter server's bytes, on 4 ranks: the ring chapter's cells assert them on the run they show.)"""

import pytest

import zerobook as zb
from conftest import TARGETS

pytestmark = (
    pytest.mark.launch
)  # starts ranks with torchrun (make test-quick leaves it out)


@pytest.fixture(scope="module")
def rings():
    """One launch of 4 ranks: the ring on groups of 1, 2, 3 and 4 of them (ranks 0..k-1)."""
    run = zb.torchrun(TARGETS / "ring_properties.py", nproc=4, echo=False)
    return {k: [r["rings"][str(k)] for r in run.ranks[:k]] for k in range(1, 5)}


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_ring_all_reduce_equals_all_reduce_and_sends_2_n_minus_1_over_n(
    rings, world_size
):
    ranks = rings[world_size]
    assert len(ranks) == world_size
    for key in ranks[0]["results"]:
        reports = [r["results"][key] for r in ranks]
        assert all(r["equal"] for r in reports), (key, world_size)
        size = reports[0]["bytes"]
        total_sent = sum(r["sent"] for r in reports)
        # every rank sends all chunks but one in each phase: exactly 2(N-1)S over the ring
        assert total_sent == 2 * (world_size - 1) * size, (key, total_sent)
        assert sum(r["received"] for r in reports) == total_sent
        if (
            reports[0]["numel"] % world_size == 0
        ):  # equal chunks: each rank sends 2(N-1)/N S
            assert all(
                r["sent"] * world_size == 2 * (world_size - 1) * size for r in reports
            ), key
    assert all(r["non_contiguous"] for r in ranks)
    n = world_size  # built-in collectives: nccl-tests' algorithm bytes S and bus bytes
    assert ranks[0]["builtin"]["all_reduce"] == {
        "calls": 1,
        "bytes": 4000,
        "bus_bytes": 4000 * 2 * (n - 1) / n,
    }
    gather = ranks[0]["builtin"]["all_gather_into_tensor"]
    assert gather["bytes"] == 4000 * n and gather["bus_bytes"] == 4000 * n * (n - 1) / n
