"""The plumbing of the performance-model pages (when_zero_pays, zero_pays_further,
nccl_collectives, appendix_perfmodel): the cases they predict, the tables they show and the
figures they draw say what the model says."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from zerobook.accounting.hardware import A100_NODE, H100_NODE  # noqa: E402
from zerobook.figures import nccl, t_star as t_star_figures  # noqa: E402
from zerobook.pages import (  # noqa: E402
    nccl_collectives,
    perfmodel_checks,
    zero_pays,
    zero_pays_further,
)
from zerobook.perfmodel import (  # noqa: E402
    LLAMA3_8B,
    LLAMA3_70B,
    critical_tokens_per_gpu,
    nccl_choice,
    predict_step,
)

ONE_NODE_8B = zero_pays.Case(LLAMA3_8B, 8, 8192, "matmul_inputs")


def test_t_star_fills_in_nodes_of_up_to_eight():
    assert zero_pays.t_star(H100_NODE, 64) == critical_tokens_per_gpu(
        H100_NODE, world_size=64, gpus_per_node=8
    )
    assert zero_pays.t_star(H100_NODE, 2) == critical_tokens_per_gpu(
        H100_NODE, world_size=2, gpus_per_node=2
    )


def test_a_case_is_predict_step_with_one_sequence_per_gpu():
    p = zero_pays.predict_case(ONE_NODE_8B, H100_NODE, 3)
    q = predict_step(
        LLAMA3_8B,
        H100_NODE,
        world_size=8,
        gpus_per_node=8,
        stage=3,
        micro_batch=1,
        seq_len=8192,
        activation_checkpointing="matmul_inputs",
        allow_oom=True,
    )
    assert p.step_s == q.step_s and p.peak_memory_bytes == q.peak_memory_bytes


def test_the_fastest_that_fits_is_the_lowest_stage_among_equals():
    stages = zero_pays.predict_stages([ONE_NODE_8B], H100_NODE)
    assert len(stages) == len(zero_pays.SCHEDULES)
    stage, p = zero_pays.fastest_that_fits(stages)["Llama 3 8B"]
    fitting = [q.step_s for q in stages.values() if q.fits]
    assert (
        p.step_s == min(fitting) and stage == 2
    )  # stage 2 gathering ahead ties stage 3 (stage 1 does not fit: 12 bytes a logit)
    table = zero_pays.stage_table(stages).html
    assert "does not fit" in table and "2, gather ahead" in table


def test_margin_limit_is_where_a_stage_stops_fitting():
    case = zero_pays.Case(LLAMA3_70B, 64, 8192, "full")
    limit = zero_pays.margin_limit(case, H100_NODE, 3, 12)
    fits = [
        zero_pays.predict_case(case, H100_NODE, 3, allocator_margin=m).fits
        for m in (limit - 1e-9, limit + 1e-9)
    ]
    assert fits == [True, False]
    assert zero_pays.lowest_fitting(case, H100_NODE, limit + 1e-9, 12) is None


def test_accumulation_counts_in_units_of_the_shard():
    ways = {
        "zero3": {
            "1": {
                "reduced": 3.0,
                "sent": {"all_gather_into_tensor": 4.0, "reduce_scatter_tensor": 2.0},
            }
        }
    }
    assert zero_pays_further.in_psi(ways, "zero3", 1) == (2.0, 1.0)
    assert zero_pays_further.sent_text(ways, "zero3", 1) == "2.00 + 1.00"


def test_with_fused_passes_all_three_lower_t_star_most():
    """At the fused quantizer's bound (DeepSpeed's kernels at full memory bandwidth) all
    three parts need the fewest tokens; with the course's measured, unfused passes they do
    not (tests/test_zeropp_pricing.py)."""
    stars = zero_pays_further.zeropp_t_star(H100_NODE, quantizer="fused")
    for nics in (8, 1):
        assert stars["all three", nics] == min(
            stars[name, nics] for name in zero_pays_further.ZEROPP_PARTS
        )
    assert "1 NIC a node" in zero_pays_further.zeropp_table(stars).html


def test_hsdp_waits_for_the_roots_all_reduce_before_the_optimizer():
    hsdp = predict_step(
        LLAMA3_8B,
        A100_NODE,
        world_size=64,
        gpus_per_node=8,
        stage=3,
        micro_batch=1,
        seq_len=8192,
        activation_checkpointing="matmul_inputs",
        shard_group=8,
    )
    wait, last = zero_pays_further.wait_before_step(hsdp)
    assert wait > 0 and (last.what, last.unit) == ("all-reduce (replicas)", "root")


@pytest.mark.parametrize("n, k", [(8, 8), (64, 8), (8, 1)])
def test_the_figure_marks_the_candidate_nccl_picks(n, k):
    for size in (2.0**12, 2.0**24, 2.0**32):
        candidates = nccl.all_reduce_candidates(size, n, k, H100_NODE)
        algorithm, protocol, seconds = nccl_choice(
            "all_reduce", size, world_size=n, gpus_per_node=k, hardware=H100_NODE
        )
        assert seconds == min(candidates.values())
        assert candidates[algorithm, protocol] == seconds


def test_the_nccl_tables_and_figure():
    assert "370.8" in nccl_collectives.bus_table((H100_NODE,)).html  # 18 x 20.6 GB/s
    table = nccl_collectives.choice_table([(H100_NODE, 8)], [2**16, 2**32]).html
    assert "64 KiB" in table and "4 GiB" in table and "nvls Simple" in table
    fig, picks = nccl.busbw_chart(
        H100_NODE, [("one node", 8, 8)], [2.0**e for e in (10, 20, 30)]
    )
    assert picks["one node"][2.0**30][0] == "nvls" and fig.axes


def test_the_t_star_figures_draw_each_line():
    fig = t_star_figures.t_star_against_gpus_chart(
        [8, 64], {"a": [1, 2], "b": [3, 4]}, "t"
    )
    assert len(fig.axes[0].get_lines()) == 2


def test_block_durations_split_the_bars_by_phase():
    from types import SimpleNamespace as Span

    bars = [
        ("communication", 0.0, 1.0, "blocks.0"),
        ("computation", 1.0, 3.0, "blocks.0"),
        ("communication", 3.0, 4.0, "blocks.0"),
        ("computation", 4.0, 8.0, "blocks.0"),
        ("communication", 8.0, 10.0, "blocks.0"),
    ]
    spans = [
        Span(unit="blocks.0", what=what, start=a, end=b)
        for what, a, b in [
            ("all-gather", 0, 1),
            ("forward", 1, 3),
            ("all-gather", 3, 5),
            ("backward", 5, 9),
            ("reduce-scatter", 9, 10),
        ]
    ]
    measured, model = perfmodel_checks.block_durations(
        bars, Span(timeline=spans + [Span(unit="root", what="forward", start=0, end=1)])
    )
    assert [measured[p][0][1] for p in perfmodel_checks.PHASES] == [1, 1, 2, 2, 4]
    assert [model[p][0][1] for p in perfmodel_checks.PHASES] == [1, 2, 1, 2, 4]


def test_the_summary_gives_each_kinds_range_and_each_row_outside_the_goal():
    row = dict(kind="busbw", fitted=False, outside="", id="a", ratio=0.9)
    published = [
        row,
        row | {"ratio": 1.1},
        row | {"kind": "tokens", "ratio": 1.0},
        row | {"kind": "tokens", "ratio": 3.0, "fitted": True},
        row | {"id": "b", "ratio": 1.5, "outside": "why"},
    ]
    rows = perfmodel_checks.summary_rows(published, {"busbw": 0.2, "tokens": 0.25})
    assert [r[1] for r in rows] == ["0.90–1.10", "1.00–1.00", "1.50"]
    assert rows[-1] == ("outside the goal: b", "1.50", "why")
