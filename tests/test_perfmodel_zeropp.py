"""ZeRO++ in the step model and the traffic count (issue 46): qwZ's int8 weight gathers, hpZ's
backward gathers inside the node and its secondary shard, qgZ's two int4 all-to-alls."""

import pytest

from test_perfmodel import predict  # Llama 3 8B on 64 GPUs in nodes of 8, ZeRO-3

from zerobook.accounting.hardware import A100_NODE, H100_NODE
from zerobook.perfmodel import (
    LLAMA3_8B,
    LLAMA3_70B,
    critical_tokens_per_gpu,
    predict_step,
)
from zerobook.perfmodel.collectives import bus_bandwidth, link_bytes
from zerobook.perfmodel.critical import zeropp_seconds
from zerobook.perfmodel.step import Layout
from zerobook.perfmodel.traffic import traffic_per_gpu
from zerobook.perfmodel.zeropp import (
    QGZ_BYTES,
    QWZ_BYTES,
    alltoall_seconds,
    quantize_seconds,
)

ALL = ("qwZ", "hpZ", "qgZ")
LAYOUT = Layout(64, 8, 64)


def nic(model=LLAMA3_70B, **options) -> float:
    return traffic_per_gpu(model, 3, LAYOUT, **options)["network"]


def gather_nic(params: float, each: float) -> float:
    """One NIC's bytes of an all-gather of `params` elements of `each` bytes over 64 GPUs."""
    return link_bytes("all_gather", params * each, world_size=64, gpus_per_node=8)[
        "nic"
    ]


def test_the_three_parts_send_four_times_less_across_nodes():
    """ZeRO++'s claim, counted: forward's gather in int8 (half), backward's inside the node
    (none across), the gradients in int4 in a g-th of the all-to-all (a quarter): about 4x."""
    assert 3.9 < nic() / nic(zeropp=ALL) < 4.2


def test_each_part_changes_only_its_own_collective():
    psi, root = LLAMA3_70B.num_params(), LLAMA3_70B.root_params()
    base = nic()
    forward, backward = gather_nic(psi, 2), gather_nic(psi - root, 2)
    qwz = base - forward - backward + gather_nic(psi, QWZ_BYTES)
    assert nic(zeropp=("qwZ",)) == pytest.approx(
        qwz + gather_nic(psi - root, QWZ_BYTES), rel=1e-12
    )  # both gathers quantized while backward still crosses the nodes
    assert nic(zeropp=("hpZ",)) == pytest.approx(base - backward, rel=1e-12)
    reduce = link_bytes("reduce_scatter", 2 * psi, world_size=64, gpus_per_node=8)[
        "nic"
    ]
    int4 = psi * QGZ_BYTES / 8 * 7 / 8  # a node's g-th, to the 7 other nodes
    assert nic(zeropp=("qgZ",)) == pytest.approx(base - reduce + int4, rel=1e-12)


def test_qgz_replaces_each_reduce_scatter_by_two_all_to_alls():
    p = predict(H100_NODE, activation_checkpointing="full", zeropp=("qgZ",))
    whats = [s.what for s in p.timeline]
    assert "reduce-scatter" not in whats
    units = LLAMA3_8B.layers + 1
    assert (
        whats.count("all-to-all (node)") == whats.count("all-to-all (nodes)") == units
    )
    node = alltoall_seconds(LLAMA3_8B.block_params() * QGZ_BYTES, 7, False, H100_NODE)
    spans = [
        s for s in p.timeline if s.what == "all-to-all (node)" and s.unit != "root"
    ]
    assert all(s.end - s.start == pytest.approx(node, rel=1e-12) for s in spans)


def test_hpz_holds_a_secondary_shard_and_each_part_shortens_a_slow_networks_step():
    """With one 200 Gb/s NIC per A100 node (the low bandwidth ZeRO++ aims at), each part
    shortens the step and the three together most; hpZ costs 2 Psi / 8 bytes per GPU."""
    slow = A100_NODE.with_(nics_per_node=1)
    steps = {
        z: predict(slow, seq_len=2048, activation_checkpointing="full", zeropp=z)
        for z in [(), ("qwZ",), ("hpZ",), ("qgZ",), ALL]
    }
    assert all(steps[z].step_s < steps[()].step_s for z in steps if z)
    assert steps[ALL].step_s == min(p.step_s for p in steps.values())
    psi = LLAMA3_8B.num_params()
    assert steps[("hpZ",)].memory["secondary shard"] == 2 * psi / 8
    assert "secondary shard" not in steps[("qwZ",)].memory


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(stage=1, zeropp=("qwZ",)), "stage must be 3"),
        (dict(zeropp=("fp8",)), "zeropp must name parts"),
        (dict(zeropp=("hpZ",), shard_group=8), "leave shard_group out"),
    ],
)
def test_zeropp_refuses_what_it_cannot_price(bad, match):
    with pytest.raises(ValueError, match=match):
        predict(H100_NODE, seq_len=2048, **bad, allow_oom=True)


def test_t_star_with_zeropp_prices_each_part_by_its_bytes():
    """T* with ZeRO++ (zerobook.perfmodel.critical): on 64 H100s the rings across nodes and the
    ring inside one run at their bus bandwidths; qwZ's int8 weights in both gathers, with its
    quantize and dequantize passes (zeropp.quantize_seconds), hpZ's backward gather inside the
    node in bf16, qgZ's int4 all-to-alls inside and then across."""
    h, rate = H100_NODE, H100_NODE.peak_flops * H100_NODE.sustained / 6
    across, inside = bus_bandwidth(64, 8, h), bus_bandwidth(8, 8, h)
    t_star = lambda *parts, q="unfused": critical_tokens_per_gpu(  # noqa: E731
        h, world_size=64, gpus_per_node=8, zeropp=parts, quantizer=q
    )
    ring = 63 / 64 / across
    assert t_star() == pytest.approx(rate * 6 * ring, rel=1e-12)
    bytes_only = t_star("qwZ", q="none")
    assert bytes_only / t_star() == pytest.approx((2 * QWZ_BYTES + 2) / 6, rel=1e-12)
    passes = quantize_seconds(1.0, 64, h, "unfused")
    assert t_star("qwZ") == pytest.approx(bytes_only + 2 * rate * passes, rel=1e-12)
    assert t_star("hpZ") == pytest.approx(rate * (4 * ring + 2 * 7 / 8 / inside))
    nics = h.nic_bandwidth * h.nics_per_node / h.gpus_per_node
    int4 = QGZ_BYTES * 7 / 8 / h.intra_bandwidth + QGZ_BYTES / 8 * 7 / 8 / nics
    assert t_star("qgZ") == pytest.approx(rate * (4 * ring + int4), rel=1e-12)
    with pytest.raises(ValueError, match="leave shard_group out"):
        critical_tokens_per_gpu(h, world_size=64, gpus_per_node=8, shard_group=8,
                                zeropp=("qwZ",))  # fmt: skip
    with pytest.raises(ValueError, match="zeropp must name parts"):
        t_star("qwz")


@pytest.mark.parametrize("hardware", [H100_NODE, A100_NODE], ids=["H100", "A100"])
@pytest.mark.parametrize("nics", [8, 1])
@pytest.mark.parametrize("parts", [("qwZ",), ("hpZ",), ("qgZ",), ALL], ids="+".join)
def test_t_star_with_zeropp_is_the_step_models_traffic_less_its_latencies(
    hardware, nics, parts
):
    """T*'s seconds per parameter, times Psi (the root kept through backward, as the step
    model keeps it), never exceed the step model's communication (its latencies only add):
    a bound, and within 2% of it for Llama 3 70B behind one NIC a node, where bytes dominate."""
    hw = hardware.with_(nics_per_node=nics)
    psi, root = LLAMA3_70B.num_params(), LLAMA3_70B.root_params()
    forward, backward, reduce = zeropp_seconds(frozenset(parts), 64, 8, 2, 2, hw)
    bandwidth = psi * (forward + reduce) + (psi - root) * backward
    p = predict_step(LLAMA3_70B, hw, world_size=64, gpus_per_node=8, stage=3, micro_batch=1,
                     seq_len=4096, activation_checkpointing="full", zeropp=parts)  # fmt: skip
    assert p.comm_s >= bandwidth
    if nics == 1:
        assert p.comm_s < 1.02 * bandwidth
