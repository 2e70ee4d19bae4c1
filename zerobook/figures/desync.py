"""Figures of a desync hang (the chapter "When a run goes wrong"), drawn from what the ranks
themselves recorded: the collectives each rank logged before running them (c10d's log, read by
zerobook.launcher.c10d_log) and each rank's flight-recorder dump, read across the ranks the way
PyTorch's analyzer (`torch.distributed.flight_recorder.fr_trace`) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.patches import Patch, Rectangle

from zerobook.figures.style import PALETTE
from zerobook.launcher.c10d_log import RankLog, first_difference

OP_COLORS = {"all_reduce": PALETTE["sky"], "broadcast": PALETTE["vermillion"]}
OTHER_OP = PALETTE["purple"]


def op_name(op: str) -> str:
    """One spelling for a collective's kind: c10d's log says ALLREDUCE, the recorder
    gloo:all_reduce; both become all_reduce."""
    op = op.split(":")[-1].lower()
    return {"allreduce": "all_reduce", "allgather": "all_gather"}.get(op, op)


def shape_text(shape) -> str:
    """A tensor's shape as a reader writes it: 64×64 (a scalar: "scalar")."""
    return "×".join(str(n) for n in shape) or "scalar"


def order_chart(ranks: dict[int, RankLog], per_step: int | None = None):
    """Each rank's collectives in the order it called them, one lane a rank, one box a call
    (its kind by colour, its shape written in it), and the first position where they differ
    marked: the lanes part there (counted from 1; c10d's SequenceNumber counts from 0).
    `per_step`: a dotted line between steps of that many collectives."""
    width = max(len(r.calls) for r in ranks.values())
    parted = first_difference(ranks)
    fig, ax = plt.subplots(figsize=(6.4, 1.2 + 0.5 * len(ranks)))
    for lane, (rank, log) in enumerate(ranks.items()):
        for i, call in enumerate(log.calls):
            color = OP_COLORS.get(op_name(call.op), OTHER_OP)
            ax.add_patch(
                Rectangle((i + 0.06, lane - 0.36), 0.88, 0.72, color=color, lw=0)
            )
            ax.text(i + 0.5, lane, shape_text(call.shape), ha="center", va="center",
                    fontsize=9)  # fmt: skip
    if parted is not None:
        ax.add_patch(
            Rectangle(
                (parted, -0.5), 1, len(ranks), fill=False, ec=PALETTE["black"], lw=1.5
            )
        )
        ax.annotate(
            f"call {parted + 1} differs",
            xy=(parted + 0.5, -0.5),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            va="bottom",
        )
    ax.set(
        xlim=(0, width),
        ylim=(len(ranks) - 0.5, -0.5),
        yticks=range(len(ranks)),
        yticklabels=[f"rank {r}" for r in ranks],
        xticks=[i + 0.5 for i in range(width)],
        xticklabels=[str(i + 1) for i in range(width)],
        xlabel="each rank's collectives, first to last, as its log lists them",
    )
    if per_step:
        for start in range(per_step, width, per_step):
            ax.axvline(start, color="grey", lw=0.8, ls=":")
    ax.tick_params(length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    kinds = sorted({op_name(c.op) for r in ranks.values() for c in r.calls})
    handles = [Patch(color=OP_COLORS.get(k, OTHER_OP), label=k) for k in kinds]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.42),
        ncol=len(handles),
        frameon=False,
    )
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class Entry:
    """One rank's flight-recorder entry for one sequence number, read as the analyzer does."""

    op: str
    sizes: list
    state: str  # as recorded: scheduled, started or completed
    done: bool  # NCCL's "completed", or (gloo, which blocks) the rank recorded a later entry


@dataclass(frozen=True)
class Row:
    """One collective (by sequence number) across the ranks."""

    seq: int
    entries: dict[
        int, Entry | None
    ]  # None: the rank never recorded this sequence number

    @property
    def same(self) -> bool:
        """Every rank recorded this collective, with one kind and the same sizes."""
        calls = {(e.op, str(e.sizes)) if e else None for e in self.entries.values()}
        return len(calls) == 1 and None not in calls

    @property
    def done_by_all(self) -> bool:
        return all(e is not None and e.done for e in self.entries.values())


def recorder_rows(dumps: dict[str, dict]) -> list[Row]:
    """Every rank's dump (file name fr_rank<r> -> torch's pickled dict) read across the ranks,
    one row a collective sequence number, oldest first."""
    by_rank = {}
    for name, dump in dumps.items():
        entries = [e for e in dump["entries"] if not e.get("is_p2p")]
        last = max(e["collective_seq_id"] for e in entries)
        by_rank[int(name.removeprefix("fr_rank"))] = {
            e["collective_seq_id"]: Entry(
                op_name(e["profiling_name"]),
                e["input_sizes"],
                e["state"],
                e["state"] == "completed" or e["collective_seq_id"] < last,
            )
            for e in entries
        }
    seqs = sorted({s for entries in by_rank.values() for s in entries})
    ranks = sorted(by_rank)
    return [Row(s, {r: by_rank[r].get(s) for r in ranks}) for s in seqs]


def first_not_done(rows: list[Row]) -> Row | None:
    """The first collective some rank did not finish: where to look."""
    return next((row for row in rows if not row.done_by_all), None)


def recorder_chart(rows: list[Row], last: int = 4):
    """The last `last` rows as a grid: a row a sequence number, a column a rank, each cell the
    entry's kind, sizes and recorded state, shaded by whether that rank got past it; the first
    row not done by every rank outlined, and whether its ranks called the same."""
    shown = rows[-last:]
    ranks = list(shown[0].entries)
    fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.62 * len(shown)))
    stuck = first_not_done(rows)
    for y, row in enumerate(shown):
        for x, rank in enumerate(ranks):
            entry = row.entries[rank]
            color = "#DDEEDD" if entry and entry.done else "#F6D7B0"
            ax.add_patch(Rectangle((x + 0.04, y - 0.44), 0.92, 0.88, color=color, lw=0))
            words = "—" if entry is None else f"{entry.op} {shape_text(entry.sizes[0])}"
            ax.text(x + 0.5, y - 0.1, words, ha="center", va="center")
            if entry:
                ax.text(x + 0.5, y + 0.22, entry.state, ha="center", va="center",
                        color="dimgrey", fontsize=9)  # fmt: skip
        verdict = "same call" if row.same else "calls differ"
        ax.text(len(ranks) + 0.08, y, verdict, va="center")
        if row is stuck:
            ax.add_patch(
                Rectangle(
                    (0, y - 0.5), len(ranks), 1, fill=False, lw=1.8, ec=PALETTE["black"]
                )  # fmt: skip
            )
    ax.set(
        xlim=(0, len(ranks) + 0.9),
        ylim=(len(shown) - 0.5, -0.5),
        yticks=range(len(shown)),
        yticklabels=[f"#{row.seq}" for row in shown],
        xticks=[x + 0.5 for x in range(len(ranks))],
        xticklabels=[f"rank {r}" for r in ranks],
    )
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.legend(
        handles=[
            Patch(color="#DDEEDD", label="the rank went past it"),
            Patch(color="#F6D7B0", label="the rank's last: not finished"),
        ],
        loc="upper center",
        bbox_to_anchor=(0.45, 0.0),
        ncol=2,
        frameon=False,
    )
    fig.tight_layout()
    return fig
