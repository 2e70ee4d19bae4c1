"""The performance model's memory: the loss's bytes per logit as an input (12 as the course
measures F.cross_entropy on fp32 logits, the fused kernels beside it), the published runs priced
with the loss each ran, the allocator's margin chosen from the measurements, and the figure of
how the verdicts move with both (issue 68, items 1 and 8)."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from zerobook.accounting.hardware import H100_NODE  # noqa: E402
from zerobook.pages import gpu_record, zero_pays  # noqa: E402
from zerobook.perfmodel import (  # noqa: E402
    ALLOCATOR_MARGIN,
    GPT3_175B,
    LLAMA3_8B,
    LLAMA3_70B,
    LOGIT_BYTES,
    predict_step,
)
from zerobook.perfmodel import published  # noqa: E402
from zerobook.perfmodel.inputs import LOSS_LOGIT_BYTES  # noqa: E402

ONE_NODE_8B = zero_pays.Case(LLAMA3_8B, 8, 8192, "matmul_inputs")
CASES = [
    ONE_NODE_8B,
    zero_pays.Case(LLAMA3_70B, 64, 8192, "full"),
    zero_pays.Case(GPT3_175B, 1024, 2048, "full"),
]


def test_the_logits_are_priced_as_the_course_measures_them_and_stage_1_no_longer_fits():
    """12 bytes a logit (memory_accounting's F.cross_entropy(logits.float()) at the start of
    backward), not 6: Llama 3 8B at stage 1 on 8 H100s needs 81.3 GB at a 10% margin, where 6
    bytes gave 74.4 and "fits from stage 1"."""
    assert LOGIT_BYTES == LOSS_LOGIT_BYTES["fp32"] == 12
    at = {
        b: zero_pays.predict_case(ONE_NODE_8B, H100_NODE, 1, logit_bytes=b, allocator_margin=0.1)
        for b in (6, 12)
    }  # fmt: skip
    assert round(at[6].peak_memory_bytes / 1e9, 1) == 74.4 and at[6].fits
    assert round(at[12].peak_memory_bytes / 1e9, 1) == 81.3 and not at[12].fits
    stages = zero_pays.predict_stages([ONE_NODE_8B], H100_NODE)  # the defaults
    assert zero_pays.fastest_that_fits(stages)["Llama 3 8B"][0] == 2
    assert not zero_pays.predict_case(ONE_NODE_8B, H100_NODE, 1).fits


def test_logit_bytes_is_an_input_of_the_memory_only():
    kw = dict(world_size=8, gpus_per_node=8, stage=3, micro_batch=1, seq_len=8192)
    kw.update(activation_checkpointing="matmul_inputs", allow_oom=True)
    a = predict_step(LLAMA3_8B, H100_NODE, logit_bytes=2, **kw)
    b = predict_step(LLAMA3_8B, H100_NODE, logit_bytes=12, **kw)
    assert a.step_s == b.step_s
    assert b.memory["logits"] - a.memory["logits"] == 8192 * LLAMA3_8B.vocab * 10
    with pytest.raises(ValueError, match="logit_bytes"):
        predict_step(LLAMA3_8B, H100_NODE, logit_bytes=-1, **kw)
    with pytest.raises(ValueError, match="logit_bytes"):
        predict_step(LLAMA3_8B, H100_NODE, logit_bytes="fused", **kw)


def test_the_losses_keep_what_their_kernels_keep():
    """F.cross_entropy on fp32 logits: log-probabilities, their gradient, the fp32 logits'
    gradient (4 + 4 + 4); flash-attn's: the 16-bit logits saved and a new 16-bit gradient;
    Liger's: the gradient written over the 16-bit logits."""
    assert LOSS_LOGIT_BYTES == {"fp32": 12, "fused": 4, "fused_inplace": 2}


def test_each_published_run_is_priced_with_the_loss_it_ran():
    rows = [r for r in published.ROWS if r["kind"] == "tokens"]
    for row in rows:
        expected = "fp32" if row["cite"] == "liang2024torchtitan" else "fused"
        assert row["loss"] == expected and row["loss_source"], row["id"]
        for p in published.row_steps(row):
            tokens = row["micro_batch"] * row["seq_len"]
            assert (
                p.memory["logits"]
                == tokens * row["model"].vocab * (LOSS_LOGIT_BYTES[row["loss"]])
            )
    for r in published.predict_all():  # and every one still within its goal
        if r["kind"] == "tokens" and not r["outside"]:
            assert abs(r["ratio"] - 1) <= published.GOAL["tokens"], r["id"]


def test_the_margin_ceiling_is_where_a_run_that_ran_would_stop_fitting():
    ceiling, run = published.margin_ceiling()
    assert run == "MPT-7B, 8 A100 (fitted)" and round(ceiling, 3) == 0.167
    row = next(r for r in published.ROWS if r["id"] == run)
    fits = [
        published.row_steps(row, allocator_margin=m, allow_oom=True)[0].fits
        for m in (ceiling - 1e-9, ceiling + 1e-9)
    ]
    assert fits == [True, False]


def test_the_default_margin_is_the_middle_of_what_the_measurements_allow():
    """No less than the least overhead the GPU check measured (DDP's 4.7%), no more than the
    published runs allow (16.7%): their middle, rounded, is 11%, not the 10% assumed before."""
    record = gpu_record.latest(needs=("memory",))
    overheads = zero_pays.measured_overheads(record.section("memory"))
    assert round(min(overheads), 3) == 0.047 and round(max(overheads), 2) == 0.70
    ceiling, _ = published.margin_ceiling()
    assert min(overheads) < ALLOCATOR_MARGIN < ceiling
    assert ALLOCATOR_MARGIN == round((min(overheads) + ceiling) / 2, 2) == 0.11


@pytest.mark.parametrize("case", CASES[:2], ids=["8B", "70B"])
def test_lowest_fitting_is_what_predict_step_says(case):
    for margin in (0.0, 0.047, 0.11, 0.3, 0.7):
        for b in (2, 4, 12):
            fits = [
                s
                for s in range(4)
                if zero_pays.predict_case(
                    case, H100_NODE, s, allocator_margin=margin, logit_bytes=b
                ).fits
            ]
            got = zero_pays.lowest_fitting(case, H100_NODE, margin, b)
            assert got == min(fits, default=None), (margin, b)


def test_the_two_inputs_decide_the_8b_stage_1_verdict_and_not_the_others():
    limit = lambda case, stage, b: zero_pays.margin_limit(case, H100_NODE, stage, b)  # noqa: E731
    assert limit(ONE_NODE_8B, 1, 12) < ALLOCATOR_MARGIN < limit(ONE_NODE_8B, 1, 4)
    assert limit(ONE_NODE_8B, 1, 6) > 0.10  # why 6 bytes said "fits from stage 1"
    assert limit(CASES[2], 3, 12) > 0.70


def test_the_sensitivity_figure_draws_a_labelled_panel_per_case():
    from zerobook.figures.fits_sensitivity import fits_sensitivity_chart

    margins, sizes = [k / 20 for k in range(15)], (2, 4, 12)
    grids = zero_pays.stage_grids(CASES, H100_NODE, margins, sizes)
    fig = fits_sensitivity_chart(grids, margins, sizes, {"default": ALLOCATOR_MARGIN})
    assert len(fig.axes) == 3
    eight = fig.axes[0]
    labels = [t.get_text() for t in eight.texts]
    assert len(labels) == len(margins) * len(sizes) and {"1", "2", "3", "-"} <= set(
        labels
    )
    assert grids[eight.get_title(loc="left")][2][0] == 1  # 12 bytes, no margin: stage 1


def test_the_pages_javascript_prices_the_logits_and_margin_as_the_python(tmp_path):
    """perfmodel.js's predictStep against predict_step with the defaults (12 bytes a logit, an
    11% margin) and with each loss's bytes, on a sample of the step explorer's menus: the same
    doubles."""
    from browser import driver
    from test_widgets import (
        JS_PREDICTIONS,
        every_step_choice,
        explorer_page,
        python_prediction,
    )

    from zerobook.accounting.hardware import PRESETS
    from zerobook.figures import step_explorer
    from zerobook.perfmodel import MODELS

    js = JS_PREDICTIONS.replace(
        "allocator_margin: c.allocator_margin ?? undefined",
        "allocator_margin: c.allocator_margin ?? undefined, logit_bytes: c.logit_bytes",
    )
    assert js != JS_PREDICTIONS
    sample = every_step_choice()[::397]
    choices = sample + [
        dict(c, logit_bytes=b) for c in sample[::3] for b in LOSS_LOGIT_BYTES.values()
    ]
    page, _, data = explorer_page(tmp_path)
    browser = driver(tmp_path / "profile")
    try:
        browser.get(page.as_uri())
        got = browser.execute_script(js, [dict(c, spans=False) for c in choices], data)
    finally:
        browser.quit()
    for choice, js_p in zip(choices, got):
        c = dict(choice)
        if "logit_bytes" not in c:
            assert js_p == python_prediction(c, spans=False), c
            continue
        b = c.pop("logit_bytes")
        model, hardware = MODELS[c.pop("model")], PRESETS[c.pop("hardware")]
        p = predict_step(
            model, hardware, **step_explorer.step_arguments(**c), logit_bytes=b,
            allow_oom=True,
        )  # fmt: skip
        assert (js_p["peak_memory_bytes"], js_p["memory"], js_p["fits"]) == (
            p.peak_memory_bytes,
            p.memory,
            p.fits,
        ), choice
