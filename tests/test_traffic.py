"""zerobook.accounting.traffic: the ring's and the parameter server's bytes, and nccl-tests' bandwidths."""

import pytest

from zerobook.accounting import traffic


def test_ring_sends_2_n_minus_1_over_n_and_stays_under_2s():
    assert traffic.ring_all_reduce_bytes(1000, 4) == 1500
    assert traffic.ring_all_reduce_bytes(1000, 1) == 0
    assert all(traffic.ring_all_reduce_bytes(1000, n) < 2000 for n in range(1, 1025))


def test_the_parameter_server_grows_with_n():
    assert traffic.parameter_server_bytes(1000, 8) == {
        "per_worker": 1000,
        "server": 8000,
    }


def test_bandwidth_follows_nccl_tests():
    bw = traffic.bandwidth(8e9, 2.0, "all_reduce", 8)
    assert bw["algbw"] == 4e9 and bw["busbw"] == pytest.approx(4e9 * 2 * 7 / 8)
    assert traffic.bandwidth(1e9, 1.0, "all_gather", 4)["busbw"] == pytest.approx(
        0.75e9
    )


@pytest.mark.parametrize("size, n", [(0, 4), (-1, 4), (10, 0)])
def test_bad_input(size, n):
    with pytest.raises(ValueError):
        traffic.ring_all_reduce_bytes(size, n)


def test_alpha_beta_fit_recovers_a_known_model():
    n, alpha, beta = 4, 50e-6, 1e-9
    sizes = [2**k for k in range(10, 27, 2)]
    seconds = [2 * (n - 1) * alpha + 2 * (n - 1) / n * s * beta for s in sizes]
    fit = traffic.fit_alpha_beta(sizes, seconds, n)
    assert fit["alpha"] == pytest.approx(alpha) and fit["beta"] == pytest.approx(beta)
    assert fit["crossover"] == pytest.approx(n * alpha / beta)
    assert traffic.predicted_seconds(fit, sizes[3]) == pytest.approx(seconds[3])
