"""qwZ priced as DeepSpeed runs it (issue 68, items 2 and 3): its quantize and dequantize
passes on the gathers' stream, compared with the rate each GPU receives at in the ring (not
one NIC's), and hpZ's backward gather quantized too when qwZ is on."""

import json

import pytest
from conftest import ROOT

from zerobook.accounting.hardware import A100_NODE, H100_NODE
from zerobook.pages import zero_pays_further
from zerobook.perfmodel import LLAMA3_8B, critical_tokens_per_gpu, predict_step
from zerobook.perfmodel.collectives import bus_bandwidth
from zerobook.perfmodel.step import Layout
from zerobook.perfmodel.traffic import traffic_per_gpu
from zerobook.perfmodel.zeropp import (
    H200_MEMORY_BANDWIDTH,
    MEASURED_H200,
    QUANTIZERS,
    QWZ_BYTES,
    break_even_bandwidth,
    quantize_seconds,
)

ALL = ("qwZ", "hpZ", "qgZ")


def t_star(nics: int, parts, quantizer: str = "unfused") -> float:
    hw = H100_NODE.with_(nics_per_node=nics)
    return critical_tokens_per_gpu(
        hw, world_size=64, gpus_per_node=8, zeropp=parts, quantizer=quantizer
    )


def test_the_unfused_rate_is_the_saved_h200_measurement():
    """The model's unfused passes are make gpu-check's timings of the course's quantizer on an
    H200, as bytes of its memory bandwidth: on an H200 they give back the seconds measured."""
    saved = json.loads(
        (ROOT / "benchmarks/results/gpu_h200_2026-11-29.json").read_text()
    )["quantize"]
    assert MEASURED_H200 == {k: saved[k] for k in ("quantize", "dequantize")}
    quantize, dequantize = QUANTIZERS["unfused"]
    assert quantize / H200_MEMORY_BANDWIDTH == pytest.approx(saved["quantize"])
    assert dequantize / H200_MEMORY_BANDWIDTH == pytest.approx(saved["dequantize"])
    with pytest.raises(ValueError, match="quantizer must be one of"):
        quantize_seconds(1.0, 8, H100_NODE, "triton")


def test_qwz_break_even_against_the_rate_each_gpu_receives():
    """The break-even is compared with the ring's bus bandwidth (each GPU receives at it in a
    flat ring across nodes), not one NIC's 47 GB/s: with the measured passes qwZ pays behind
    one NIC a node (47 GB/s) and slows the gather from two NICs on (94, ..., 376 GB/s on a DGX);
    DeepSpeed's fused kernels, a bound, would break even above a DGX's ring."""
    nic = H100_NODE.nic_bandwidth
    edge = break_even_bandwidth(64, H100_NODE, "unfused")
    receives = {
        k: bus_bandwidth(64, 8, H100_NODE.with_(nics_per_node=k)) for k in (1, 2, 4, 8)
    }
    assert receives[8] == 8 * nic  # 376 GB/s, the book's own when_zero_pays figure
    assert nic < edge < receives[2]  # not "faster than the NIC's": slower than the ring
    assert [k for k in receives if receives[k] < edge] == [1]
    assert receives[8] < break_even_bandwidth(64, H100_NODE, "fused")
    # inside a node (hpZ's gather) NVLink is faster than either break-even over 8 ranks
    assert break_even_bandwidth(8, H100_NODE, "unfused") < bus_bandwidth(
        8, 8, H100_NODE
    )


def test_t_star_prices_the_passes():
    """The T* tables stop pricing quantization as free: with the measured passes qwZ raises T*
    on 8 NICs a node (was 1,382 < ZeRO-3's 2,072) and still lowers it behind one."""
    assert t_star(8, ("qwZ",), "none") == pytest.approx(1382, abs=1)  # as it stood
    assert t_star(8, ("qwZ",)) > t_star(8, ())
    assert t_star(1, ("qwZ",)) < t_star(1, ())
    assert t_star(8, ("qwZ",), "fused") < t_star(8, ())  # the fused bound: it would pay
    stars = zero_pays_further.zeropp_t_star(H100_NODE)
    assert stars["qwZ", 8] == t_star(8, ("qwZ",))


def test_hpz_with_qwz_quantizes_the_backward_gather_too():
    """DeepSpeed quantizes hpZ's secondary gather under qwZ: "all three" on 64 H100s, bytes
    only, is 966 tokens with 8 NICs a node and 4,461 with one (was 1,278 and 4,772 with that
    gather in bf16); with the measured passes 4,362 and 7,856, DeepSpeed's fused bound 1,557
    and 5,051."""
    assert round(t_star(8, ALL, "none")) == 966
    assert round(t_star(1, ALL, "none")) == 4461
    assert round(t_star(8, ALL)) == 4362 and round(t_star(1, ALL)) == 7856
    assert (
        round(t_star(8, ALL, "fused")) == 1557
        and round(t_star(1, ALL, "fused")) == 5051
    )


def test_the_step_model_and_the_traffic_quantize_the_secondary_gather():
    """In the step model each backward gather of a block is int8 inside the node and lasts its
    passes; in the traffic count hpZ + qwZ's NVLink bytes are the int8 ones."""
    hw = A100_NODE.with_(nics_per_node=1)
    args = dict(world_size=64, gpus_per_node=8, stage=3, micro_batch=1, seq_len=2048,
                activation_checkpointing="full")  # fmt: skip
    runs = {
        q: predict_step(LLAMA3_8B, hw, zeropp=("qwZ", "hpZ"), quantizer=q, **args)
        for q in ("none", "unfused")
    }
    block = LLAMA3_8B.block_params()
    for q, p in runs.items():
        gathers = [s for s in p.timeline if s.what == "all-gather" and s.unit != "root"]
        backward = gathers[len(gathers) // 2 + 1]  # forward's blocks first
        bf16 = predict_step(LLAMA3_8B, hw, zeropp=("hpZ",), **args)
        plain = [
            s for s in bf16.timeline if s.what == "all-gather" and s.unit != "root"
        ]
        ratio = (backward.end - backward.start) / (plain[-1].end - plain[-1].start)
        if q == "none":
            assert ratio < 0.6  # int8 over NVLink (was 1: bf16)
        else:
            passes = quantize_seconds(block, 8, hw, "unfused")
            assert backward.end - backward.start > passes
    layout = Layout(64, 8, 64)
    nvlink = {
        z: traffic_per_gpu(LLAMA3_8B, 3, layout, zeropp=z)["nvlink"]
        for z in [("hpZ",), ("qwZ", "hpZ")]
    }
    again = LLAMA3_8B.num_params() - LLAMA3_8B.root_params()
    saved = again * (2 - QWZ_BYTES) * 7 / 8
    assert nvlink[("hpZ",)] - nvlink[("qwZ", "hpZ")] > 0.99 * saved


def test_the_chapters_compare_with_the_ring_not_one_nic():
    """The zeropp chapter no longer says qwZ's gather ends sooner across nodes because its
    break-even beats one NIC; zero_pays_further's table shows the passes and a fused bound."""
    cells = json.loads((ROOT / "chapters/zeropp.ipynb").read_text())["cells"]
    text = " ".join(
        " ".join("".join(c["source"]).split())
        for c in cells
        if c["cell_type"] == "markdown"
    )
    assert (
        "So across nodes qwZ's gather ends sooner even with these unfused passes"
        not in text
    )
    assert "with the quantization kernels left out" not in text
    assert "bus bandwidth" in text and "fused" in text
    further = json.loads((ROOT / "chapters/zero_pays_further.ipynb").read_text())
    code = " ".join("".join(c["source"]) for c in further["cells"])
    assert 'quantizer="fused"' in code


def test_the_t_star_table_names_the_fastest_part_by_its_quantizer():
    """With the measured passes hpZ + qgZ, without qwZ, needs the fewest tokens on 8 NICs a
    node and on one; with DeepSpeed's fused kernels at their bound all three do (the claim
    "all three lower T* most" holds only at that bound)."""
    parts = zero_pays_further.ZEROPP_PARTS
    stars = zero_pays_further.zeropp_t_star(H100_NODE)
    fused = zero_pays_further.zeropp_t_star(H100_NODE, quantizer="fused")
    for nics in (8, 1):
        assert min(parts, key=lambda n: stars[n, nics]) == "hpZ + qgZ"
        assert min(parts, key=lambda n: fused[n, nics]) == "all three"
    html = zero_pays_further.zeropp_table(stars, fused=fused).html
    assert "1 NIC a node, fused (bound)" in html and "hpZ + qgZ" in html


def test_the_break_even_figure_draws_the_models_numbers():
    """zerobook.figures.zeropp_pays: a bar per NIC count at the ring's bus bandwidth, a line
    per quantizer at its break-even; the bars below the measured line are the one-NIC one."""
    import matplotlib

    matplotlib.use("Agg")
    from zerobook.figures.zeropp_pays import break_even_chart, break_evens

    edge, receives = break_evens(H100_NODE)
    assert edge["unfused"] == break_even_bandwidth(64, H100_NODE)
    assert receives == {k: k * H100_NODE.nic_bandwidth for k in (1, 2, 4, 8)}
    ax = break_even_chart(edge, receives, "64 H100s").axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert heights == [r / 1e9 for r in receives.values()]
    lines = sorted(line.get_ydata()[0] for line in ax.lines)
    assert lines == sorted(e / 1e9 for e in edge.values())
