"""The tables and the figure the later chapters build from their runs (zerobook/figures/run_tables.py,
zerobook/figures/paper_tables.py), on small records written here; the chapters run them on the
real reports (nbval)."""

import pytest

from zerobook.accounting import memory
from zerobook.accounting import zero_paper as paper
from zerobook.figures import paper_tables, run_tables


def event(what, unit, gathered):
    return {"what": what, "unit": unit, "t": 0.0, "gathered": gathered}


def test_blocks_at_peak_counts_blocks_besides_the_root_in_each_half():
    root, block = 100, 10
    records = [
        event("gather", "root", root),
        event("gather", "blocks.0", root + block),
        event("prefetch", "blocks.1", root + 2 * block),
        event("gather (backward)", "root", root),
        event("gather (backward)", "blocks.1", root + block),
    ]
    from zerobook.zero import timeline

    events = timeline.events_from(records)
    assert run_tables.blocks_at_peak(events, root, block) == (2, 1)
    assert run_tables.root_and_block({"root": 100, "blocks.0": 10, "blocks.1": 8}) == (
        100,
        10,
    )


def test_traffic_is_over_plain_zero3_and_a_failed_run_says_why():
    runs = {
        "plain": {"sent": {"a": 3, "b": 1}, "gathers": {"blocks.0": 2}, "diff": 0.0},
        "naive": {"sent": {"a": 5}, "gathers": {"blocks.0.x": 3}, "diff": 0.0},
        "broken": {"error": "storage of size 0"},
    }
    runs["plain"]["forwards"] = runs["naive"]["forwards"] = {"blocks.0": 1}
    traffic = run_tables.traffic_ratios(runs)
    assert traffic == {"plain": 1.0, "naive": 1.25}
    assert run_tables.first_block({"root": 1}) == "—"
    html = run_tables.recompute_table(runs, traffic, "caption")._repr_html_()
    assert "1.250" in html and "failed: storage of size 0" in html


def test_offload_split_keeps_a_quarter_on_the_gpu():
    states = {(7.5e9, 64): memory.model_state_bytes(7.5e9, stage=3, world_size=64)}
    html = run_tables.offload_split_table(states)._repr_html_()
    assert "<td>1.88</td><td>0.47</td><td>1.41</td>" in html  # the paper's 1.88 GB


def test_every_system_in_the_offload_table_says_what_it_keeps():
    html = run_tables.offload_systems_table(
        {system: 0 for system in run_tables.KEPT_ON_GPU}, "c"
    )._repr_html_()
    assert all(what in html for what in run_tables.KEPT_ON_GPU.values())
    with pytest.raises(KeyError):
        run_tables.offload_systems_table({"another system": 0}, "c")


def test_table_1_differences_are_under_one_unit_and_4187_is_half_a_unit_low():
    differences = paper_tables.table1_differences()
    assert len(differences) == 3 * sum(len(by_n) for by_n in paper.TABLE_1.values())
    assert all(abs(gap) < 1 for gap in differences.values())
    assert differences["1T", 64, 1] == -0.5  # 4187 printed for 4187.5
    assert differences["128B", 16, 2] == 0  # 368, exact


def test_the_table_1_figure_is_legible_in_the_book():
    from zerobook.figures.style import rendered_text_px

    fig = paper_tables.table1_differences_chart(paper_tables.table1_differences())
    assert fig.get_size_inches()[0] <= 7
    assert rendered_text_px(fig) >= 9
