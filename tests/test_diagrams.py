"""The diagrams of ideas: drawn from a real FlatParams and real Events, agreeing with
zerobook.accounting.memory, legible in the book's column."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from zerobook.accounting import memory  # noqa: E402
from zerobook.figures import diagrams, reports, style, timelines  # noqa: E402
from zerobook.zero import FlatParams  # noqa: E402
from zerobook.zero.timeline import Event  # noqa: E402

from test_plots import EVENTS  # noqa: E402


def tiny_flat(world_size=4, bucket_numel=None):
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2)
    )
    return FlatParams(
        model.parameters(), world_size=world_size, bucket_numel=bucket_numel
    )


@pytest.mark.parametrize("bucket_numel", [None, 10])
def test_each_rank_holds_the_calculators_bytes_and_the_shards_tile_the_buffer(
    bucket_numel,
):
    flat = tiny_flat(bucket_numel=bucket_numel)
    for stage in memory.STAGES:
        expected = memory.model_state_bytes(
            flat.padded, stage=stage, world_size=flat.world_size
        ).total
        assert [diagrams.held_bytes(flat, stage, r) for r in range(4)] == [expected] * 4
    shards = sorted(
        r for rank in range(4) for r in diagrams.held_ranges(flat, 1, rank)["optimizer"]
    )
    assert len(shards) == 4 * len(flat.buckets)  # every rank's N-th of every bucket
    assert (
        all(a[1] == b[0] for a, b in zip(shards, shards[1:]))
        and shards[-1][1] == flat.padded
    )


def test_padding_is_where_flat_params_put_its_zeros():
    flat = tiny_flat(bucket_numel=10)
    pads = diagrams.padding_ranges(flat)
    assert sum(b - a for a, b in pads) == flat.padded - flat.numel > 0
    assert all(float(flat.flat[a:b].abs().sum()) == 0 for a, b in pads)


def test_a_kept_unit_is_held_until_the_bytes_fall():
    events = [
        Event(0, "gather", "root", 0),
        Event(1, "compute", "root", 4),
        Event(2, "gather", "b", 4),
        Event(3, "compute", "b", 14),
        Event(4, "computed", "b", 14),
        Event(5, "computed", "root", 4),
        Event(6, "reduce-scatter", "root", 4),
        Event(7, "reduced", "root", 0),
    ]
    spans = timelines.held_spans(events, {"root": 4, "b": 10})
    assert spans == [
        ("b", 2, 4),
        ("root", 0, 6),
    ]  # root's forward did not free it: its bytes stayed


CHARTS = {
    "shard_layout": lambda: diagrams.shard_layout_chart(
        tiny_flat(), ["W1", "b1", "g", "B", "W2", "b2"]
    ),
    "stacked_bytes": lambda: diagrams.stacked_bytes_chart(
        diagrams.model_states_rows(7.5e9, 64)
    ),
    "unit_timeline": lambda: timelines.unit_timeline_chart(EVENTS, {"blocks.0": 10}),
    "all_reduce": lambda: reports.all_reduce_chart(
        [{"rank": r, "contribution": r + 1, "total": 10} for r in range(4)]
    ),
    "straggler": lambda: reports.straggler_chart(
        [
            {
                "rank": r,
                "steps": [{"compute_s": 0.001 + 0.05 * (r == 2), "reduce_s": 0.05}] * 3,
            }
            for r in range(3)
        ]
    ),
    "resume": lambda: reports.resume_chart(
        {str(s): 5 - s / 10 for s in range(10)},
        {str(s): 5 - s / 10 for s in range(6, 10)},
        start=6,
        kill_step=7,
    ),
}


@pytest.mark.parametrize("name", CHARTS)
def test_every_diagram_is_legible_in_the_books_column(name):
    assert style.rendered_text_px(CHARTS[name]()) >= 9


def test_the_resume_chart_draws_every_step_of_both_runs():
    fig = CHARTS["resume"]()
    never, resumed = fig.axes[0].get_lines()[:2]
    assert list(never.get_xdata()) == list(range(10)) and list(resumed.get_xdata()) == [
        6,
        7,
        8,
        9,
    ]
