"""The ZeRO++ chapter's diagrams (zerobook.figures.zeropp_diagrams) place each piece where the
course's own code does: hpZ's primary slot is FlatParams' shard, its secondary piece is what
HpzUnit.free keeps and its backward group is node_groups'; qgZ's routes are the ones
quantized_reduce_scatter sends, traced on 8 ranks as threads of one process (each all-to-all
routed without quantizing), with groups from groups_of."""

import threading
from types import SimpleNamespace

import matplotlib
import pytest
import torch

from zerobook.figures import zeropp_diagrams
from zerobook.figures.style import rendered_text_px
from zerobook.zero import hpz, qgz
from zerobook.zero.flat import FlatParams

matplotlib.use("Agg")
WORLD, NODE = 8, 4


def fake_dist(rank: int) -> SimpleNamespace:
    """The three calls node_groups and groups_of make; a group is the tuple of its ranks."""
    return SimpleNamespace(
        get_world_size=lambda: WORLD, get_rank=lambda: rank, new_group=tuple
    )


def tagged_flat(elements: int = 37) -> FlatParams:
    """A unit's flat buffer (padded to N) whose element i holds i."""
    param = torch.nn.Parameter(torch.arange(elements, dtype=torch.float32))
    return FlatParams([param], WORLD, flat_grads=False)


def slots(flat: FlatParams, values: torch.Tensor) -> list[int]:
    """The slots (N-ths of the padded buffer) that a piece of `flat` covers."""
    per_slot = flat.padded // WORLD
    return sorted({int(v) // per_slot for v in values.tolist()})


@pytest.mark.parametrize("rank", range(WORLD))
def test_hpz_layout_is_where_flatparams_and_hpz_unit_put_each_piece(rank, monkeypatch):
    layout = zeropp_diagrams.hpz_layout(WORLD, NODE)[rank]
    flat = tagged_flat()
    flat.flat.copy_(torch.arange(flat.padded))  # the padding tagged too
    shard = flat.shard_of(flat.flat, flat.buckets[0], rank)
    assert layout["primary"] == slots(flat, shard)

    monkeypatch.setattr(hpz, "dist", fake_dist(rank))
    group, node_rank = hpz.node_groups(NODE)
    assert layout["backward"] == list(group) and rank in group

    monkeypatch.setattr(hpz, "node_groups", lambda size: (group, node_rank))
    unit = object.__new__(hpz.hpz_unit(NODE))  # no __init__: it would all-gather
    unit.flat, unit.for_forward = flat, True
    unit.free()  # freed after its forward, outside backward: keeps its secondary piece
    assert layout["secondary"] == slots(flat, unit.secondary)


class Routed:
    """all-to-all among threads, one per rank: row i of a sender's rows to its group's i-th
    rank, recorded as (hop, sender, piece) -> receiver, a piece named by its tag."""

    def __init__(self):
        self.me, self.lock = threading.local(), threading.Lock()
        self.boxes, self.barriers, self.sent = {}, {}, {}

    def exchange(self, rows, group, block):
        hop = self.me.hops.pop(0)
        with self.lock:
            box = self.boxes.setdefault((hop, group), {})
            barrier = self.barriers.setdefault(
                (hop, group), threading.Barrier(len(group), timeout=30)
            )
        box[self.me.rank] = rows
        for i, row in enumerate(rows):
            for chunk in row.view(-1, WORLD):  # a piece: tag p + 1 where its ranks were
                self.sent[hop, self.me.rank, int(chunk.max()) - 1] = group[i]
        barrier.wait()
        return torch.stack([box[s][group.index(self.me.rank)] for s in group])

    def rank(self, rank: int, out: dict) -> None:
        self.me.rank, self.me.hops = rank, ["inside", "across"]
        full = torch.zeros(WORLD, WORLD)  # piece p, element `rank`: p + 1
        full[:, rank] = torch.arange(1, WORLD + 1, dtype=torch.float32)
        out[rank] = qgz.quantized_reduce_scatter(full.view(-1), self.groups[rank], 256)


def test_qgz_routes_are_the_ones_quantized_reduce_scatter_sends(monkeypatch):
    routed, out = Routed(), {}
    routed.groups = {}
    for rank in range(WORLD):
        monkeypatch.setattr(qgz, "dist", fake_dist(rank))
        routed.groups[rank] = qgz.groups_of(NODE)
    monkeypatch.setattr(qgz, "exchange", routed.exchange)
    threads = [
        threading.Thread(target=routed.rank, args=(r, out)) for r in range(WORLD)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    routes = zeropp_diagrams.qgz_routes(WORLD, NODE)
    traced = {
        hop: {(s, p): r for (h, s, p), r in routed.sent.items() if h == hop}
        for hop in ("inside", "across")
    }
    assert traced == routes
    for rank in range(
        WORLD
    ):  # each rank ends with its own piece, summed over all ranks
        assert out[rank].tolist() == [rank + 1.0] * WORLD


@pytest.mark.parametrize("chart", ["hpz_chart", "qgz_chart"])
def test_the_diagrams_fit_a_page_and_stay_legible(chart):
    fig = getattr(zeropp_diagrams, chart)(WORLD, NODE)
    assert fig.get_figwidth() <= 7 and rendered_text_px(fig) >= 9
    matplotlib.pyplot.close(fig)


def test_a_node_size_that_does_not_divide_the_ranks_is_refused():
    with pytest.raises(ValueError, match="must divide"):
        zeropp_diagrams.qgz_routes(8, 3)
