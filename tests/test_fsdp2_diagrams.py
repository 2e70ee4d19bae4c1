"""zerobook.figures.fsdp2_diagrams: the FSDP2 chapter's figures drawn from reports shaped as its
runs write them (no ranks launched), legible in the book's column, true to the data."""

import matplotlib
import pytest

matplotlib.use("Agg")

from zerobook.figures import fsdp2_diagrams as d  # noqa: E402
from zerobook.figures import style  # noqa: E402

UNITS = ["root", "blocks.0", "blocks.1"]
PARAMS = [  # rank 0's dtensor rows, as zerobook.runs.fsdp2_practice reports them (2 ranks)
    {"name": "embed.weight", "full": [8, 4], "local": [4, 4]},
    {"name": "blocks.0.mlp.0.weight", "full": [6, 4], "local": [3, 4]},
    {"name": "blocks.0.mlp.0.bias", "full": [6], "local": [3]},
    {"name": "blocks.1.mlp.0.weight", "full": [6, 4], "local": [3, 4]},
    {"name": "ln_f.weight", "full": [4], "local": [2]},
]
TRACE = {
    "order": [
        {"unit": "root", "pass": "forward", "by": "root"},
        {"unit": "blocks.0", "pass": "forward", "by": "blocks.0"},
        {"unit": "blocks.1", "pass": "forward", "by": "blocks.1"},
        {"unit": "blocks.1", "pass": "backward", "by": "root"},
        {"unit": "blocks.0", "pass": "backward", "by": "blocks.1"},
    ]
}


def hsdp_rank(rank):
    shard = [0, 1] if rank < 2 else [2, 3]
    replicate = [0, 2] if rank % 2 == 0 else [1, 3]
    return {
        "shard_group": shard,
        "replicate_group": replicate,
        "traffic": {
            f"all_gather_into_tensor over {tuple(shard)}": {"calls": 5, "bytes": 1},
            f"reduce_scatter_tensor over {tuple(shard)}": {"calls": 3, "bytes": 1},
            f"all_reduce over {tuple(replicate)}": {"calls": 3, "bytes": 1},
        },
    }


def texts(fig):
    return {t.get_text() for t in fig.findobj(matplotlib.text.Text)}


def test_a_parameter_belongs_to_its_innermost_unit_else_to_the_root():
    assert d.owner("blocks.1.mlp.0.weight", UNITS) == "blocks.1"
    assert d.owner("blocks.10.mlp.0.weight", UNITS + ["blocks.10"]) == "blocks.10"
    assert d.owner("embed.weight", UNITS) == d.owner("ln_f.bias", UNITS) == "root"


def test_each_rank_holds_the_bytes_of_its_own_shards_by_unit():
    other = [
        dict(p, local=[p["full"][0] - p["local"][0], *p["full"][1:]]) for p in PARAMS
    ]
    held = d.unit_bytes_per_rank([PARAMS, other], UNITS)
    assert held[0] == {"root": 4 * (16 + 2), "blocks.0": 4 * 15, "blocks.1": 4 * 12}
    assert sum(map(sum, (h.values() for h in held))) == 4 * (32 + 24 + 6 + 24 + 4)


def test_the_units_figure_counts_each_units_parameters_and_draws_every_gather():
    fig = d.units_and_gathers(PARAMS, TRACE)
    assert {"36 in 2 tensors", "30 in 2 tensors", "24 in 1 tensors"} <= texts(fig)
    right = fig.axes[1]
    markers = [line for line in right.get_lines() if len(line.get_xdata())]
    assert [int(line.get_xdata()[0]) for line in markers] == [1, 2, 3, 4, 5]
    assert len([a for a in right.texts if a.arrow_patch]) == 2  # the two prefetches


def test_the_meta_figure_shows_no_bytes_on_meta_and_each_ranks_total():
    fig = d.meta_materialised([PARAMS, PARAMS], full_bytes=4 * 86)
    total = f"{4 * (16 + 15 + 12 + 2):,}"
    assert {"0 bytes", total, "the whole model: 344 bytes"} <= texts(fig)


def test_the_mesh_places_ranks_by_their_groups_and_labels_each_dimensions_collectives():
    fig = d.hsdp_mesh([hsdp_rank(r) for r in range(4)])
    shown = texts(fig)
    assert {"rank 0\nshard 0", "rank 2\nshard 0", "rank 3\nshard 1"} <= shown
    assert "all-gather ×5\nreduce-scatter ×3" in shown and "all-reduce ×3" in shown
    assert "replicate group (1, 3):\nshard 1" in shown


def test_the_mesh_refuses_groups_that_do_not_form_a_grid():
    ranks = [hsdp_rank(r) for r in range(4)]
    ranks[0]["replicate_group"] = [0, 3]
    with pytest.raises(AssertionError):
        d.hsdp_mesh(ranks)


@pytest.mark.parametrize("name", ["units", "meta", "mesh"])
def test_every_figure_is_legible_in_the_books_column(name):
    fig = {
        "units": lambda: d.units_and_gathers(PARAMS, TRACE),
        "meta": lambda: d.meta_materialised([PARAMS], full_bytes=4 * 86),
        "mesh": lambda: d.hsdp_mesh([hsdp_rank(r) for r in range(4)]),
    }[name]()
    assert style.rendered_text_px(fig) >= 9
    assert fig.get_figwidth() <= 7


class Record:
    """A saved GPU record's face (zerobook.pages.gpu_record.GpuRecord): label, path, sections."""

    def __init__(self, path, **sections):
        self.path, self.label, self.sections = path, f"measured ({path})", sections

    def section(self, name):
        return self.sections.get(name)


def torchao_run(hidden, compiled, bf16, fp8):
    config = {"hidden": hidden, "layers": 2, "compile": compiled}
    return {"config": config, "bf16": {"step_s": bf16}, "float8": {"step_s": fp8}}


AO = {
    "torchao": "0.1",
    "eager": torchao_run(2048, False, 1.0, 2.0),
    "compiled": torchao_run(2048, True, 1.0, 1.25),
    "wider": {"8192": torchao_run(8192, True, 3.0, 2.0)},
}


def test_fp8_speedups_are_bf16s_step_over_fp8s():
    from zerobook.pages import fp8_record

    assert fp8_record.speedups(AO) == {"eager": 0.5, "compiled": 0.8, "8192": 1.5}


def test_fp8_lines_name_each_record_once_or_say_none_was_taken():
    from zerobook.pages import fp8_record

    mm = {"fp8": 2e15, "bf16": 1e15, "n": 8}
    one = Record("a.json", fp8_matmul=mm, torchao=AO)
    text = fp8_record.lines(lambda needs: one)
    assert text.count("measured (a.json)") == 1 and "FP8 is 2.00 times as fast" in text
    assert (
        "hidden 8192, 2 layers, compiled: bf16 3000.0 ms" in text and "(1.50x)" in text
    )
    none = fp8_record.lines(lambda needs: None)
    assert none.count("No GPU host has") == 2
