"""The global-batch ceiling of ZeRO-3 alone (zerobook.perfmodel.critical_batch) and its figure
(zerobook.figures.critical_batch): the crossing N against T* itself, the published batches
against their papers' own arithmetic, and the figure's data against the model."""

import matplotlib
import pytest

matplotlib.use("Agg")

from zerobook.accounting.hardware import H100_NODE  # noqa: E402
from zerobook.perfmodel import critical_tokens_per_gpu  # noqa: E402
from zerobook.perfmodel.critical_batch import (  # noqa: E402
    LLAMA3_405B_RUNS,
    MEBI,
    PUBLISHED_BATCHES,
    ceiling_lines,
    largest_world_size,
    least_global_batch,
)

BATCH = {b.run: b for b in PUBLISHED_BATCHES}
FP32 = dict(reduce_bytes=4)  # Llama 3's and torchtitan's reduction


def star_times_n(n, **options):
    return n * critical_tokens_per_gpu(
        H100_NODE, world_size=n, gpus_per_node=8, **options
    )


@pytest.mark.parametrize("options", [{}, FP32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("run", list(BATCH))
def test_the_crossing_is_the_last_node_whose_t_star_times_n_fits_the_batch(
    run, options
):
    """Computed from T* directly, not from least_global_batch: N x T*(N) is within the batch
    and one node more is not."""
    tokens = BATCH[run].tokens
    n = largest_world_size(H100_NODE, tokens, gpus_per_node=8, **options)
    assert n % 8 == 0 and n > 0
    assert star_times_n(n, **options) <= tokens < star_times_n(n + 8, **options)


def test_at_1024_gpus_t_star_already_means_over_2m_tokens_a_step():
    """The issue's premise: N x T* at 1,024 H100s passes 2M tokens (bf16), GPT-3's 3.2M
    batch leaves room for fewer than 2,048 GPUs even so."""
    assert least_global_batch(H100_NODE, world_size=1024, gpus_per_node=8) > 2e6
    assert 1024 < largest_world_size(H100_NODE, 3.2e6, gpus_per_node=8) < 2048


def test_fp32_reductions_lower_the_crossing_by_a_quarter():
    """8 bytes a parameter instead of 6: T* x 4/3, so the crossing N x 3/4 (to a node)."""
    b = BATCH["Llama 3 405B, after 2.87T tokens"].tokens
    bf16 = largest_world_size(H100_NODE, b, gpus_per_node=8)
    fp32 = largest_world_size(H100_NODE, b, gpus_per_node=8, **FP32)
    assert abs(fp32 - 0.75 * bf16) <= 8


def test_a_whole_sequence_per_gpu_caps_llama3_at_its_batch_over_its_sequence():
    """Without context parallelism each GPU takes at least a sequence: 16M / 8,192 = 2,048
    GPUs, well below T*'s crossing; Llama 3 405B ran on 8,192 and 16,384 (Table 4)."""
    b = BATCH["Llama 3 405B, after 2.87T tokens"]
    whole = largest_world_size(
        H100_NODE, b.tokens, gpus_per_node=8, seq_len=b.seq_len, **FP32
    )
    assert whole == b.tokens // b.seq_len == 2048
    ceiling = largest_world_size(H100_NODE, b.tokens, gpus_per_node=8, **FP32)
    for gpus, *_, tokens in LLAMA3_405B_RUNS:
        assert tokens == b.tokens and ceiling < gpus
        assert tokens / gpus < critical_tokens_per_gpu(
            H100_NODE, world_size=gpus, gpus_per_node=8, **FP32
        )


def test_the_published_batches_follow_their_papers_arithmetic():
    """Llama 3's Table 4: DP x batch size/DP x sequence = the 16M; the ramp doubles twice;
    DeepSeek-V3's 15,360 sequences of 4K; GPT-3's 3.2M as printed."""
    for gpus, tp, cp, pp, dp, seq, tokens in LLAMA3_405B_RUNS:
        assert tp * cp * pp * dp == gpus
    assert (
        64 * 32 * 8192 == BATCH["Llama 3 405B, after 2.87T tokens"].tokens == 16 * MEBI
    )
    llama = [b.tokens for b in PUBLISHED_BATCHES if b.run.startswith("Llama")]
    assert llama == [4 * MEBI, 8 * MEBI, 16 * MEBI]
    assert BATCH["DeepSeek-V3"].tokens == 15360 * 4096
    assert BATCH["GPT-3 175B"].tokens == 3.2e6
    assert all(b.source for b in PUBLISHED_BATCHES)


def test_micro_batches_and_sequences_raise_the_least_batch():
    base = least_global_batch(H100_NODE, world_size=64, gpus_per_node=8)
    assert least_global_batch(
        H100_NODE, world_size=64, gpus_per_node=8, micro_batches=4
    ) == pytest.approx(4 * base, rel=1e-12)
    assert (
        least_global_batch(H100_NODE, world_size=64, gpus_per_node=8, seq_len=8192)
        == 64 * 8192
    )
    assert largest_world_size(H100_NODE, 1e4, gpus_per_node=8) == 0


def test_the_figure_draws_the_models_numbers():
    from zerobook.figures.critical_batch import global_batch_chart

    gpus = [64 * 2**k for k in range(10)]
    lines = ceiling_lines(H100_NODE, gpus)
    crossings = {
        b.run: largest_world_size(H100_NODE, b.tokens, gpus_per_node=8, **FP32)
        for b in PUBLISHED_BATCHES
    }
    fig = global_batch_chart(gpus, lines, PUBLISHED_BATCHES, crossings, "t")
    ax = fig.axes[0]
    drawn = {line.get_label(): list(line.get_ydata()) for line in ax.lines}
    for label, tokens in lines.items():
        assert drawn[label] == tokens
    for n, t in zip(gpus, lines["ZeRO-3, gradients in fp32"]):
        assert t == pytest.approx(star_times_n(n, **FP32), rel=1e-12)
    levels = {
        float(line.get_ydata()[0]) for line in ax.lines if line.get_linestyle() == ":"
    }
    assert levels == {b.tokens for b in PUBLISHED_BATCHES}
    marks = {
        (float(line.get_xdata()[0]), float(line.get_ydata()[0]))
        for line in ax.lines
        if line.get_marker() == "D"
    }
    assert marks == {(crossings[b.run], b.tokens) for b in PUBLISHED_BATCHES}
    matplotlib.pyplot.close(fig)


def test_the_chapter_computes_every_number_of_its_section():
    """scaling_out's section: the crossing from the model, the figure from ceiling_lines, every
    `cb_` number in its prose glued by a cell, and the conclusion named in words."""
    import json
    import re

    from conftest import ROOT

    cells = json.loads((ROOT / "chapters" / "scaling_out.ipynb").read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    text = "\n".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
    )
    assert "largest_world_size(" in code and "ceiling_lines(" in code
    assert "{term}`critical batch`" in text and "<fig-critical-batch>" in text
    used = set(re.findall(r"\{glue:text\}`(cb_[a-z0-9_]+)`", text))
    glued = set(re.findall(r'glue\(\s*f?"(cb_[a-z0-9_{}]+)"', code))
    expanded = {g for g in glued if "{" not in g} | {
        f"cb_n_{key}{end}"
        for key in ("gpt3", "4m", "ds", "16m")
        for end in ("", "_fp32")
    }
    assert used and used <= expanded, used - expanded
    prose = " ".join(text.split())
    for way in ("Tensor parallelism", "pipeline parallelism", "context parallelism"):
        assert way in prose
