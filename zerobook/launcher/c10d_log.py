"""Reading PyTorch's own distributed log (c10d's), the CPU analogue of NCCL's.

With `TORCH_CPP_LOG_LEVEL=INFO` every rank prints, as it joins the job, the store it reached
(`TCPStore.cpp`: "TCP client connected to host localhost:41467"). With
`TORCH_DISTRIBUTED_DEBUG=DETAIL` too, it prints each collective's fingerprint before it runs it
(`ProcessGroupWrapper.cpp`):

    [Rank 1] Running collective: CollectiveFingerPrint(SequenceNumber=8, OpType=ALLREDUCE,
    TensorShape=[64, 64], ...

`zb.torchrun` tags each line with its rank (`[rank1] `); `read` turns such a log into what each
rank said: the store it reached and the collectives it called, in order.
"""

import re
from dataclasses import dataclass, field

TAG = re.compile(r"^\[rank(?P<rank>\d+)\] (?P<text>.*)$")
STORE = re.compile(r"TCP client connected to host (?P<store>\S+)")
CALL = re.compile(
    r"Running collective: CollectiveFingerPrint\(SequenceNumber=(?P<seq>\d+), "
    r"OpType=(?P<op>\w+), TensorShape=\[(?P<shape>[\d, ]*)\]"
)


@dataclass(frozen=True)
class Call:
    """One collective a rank logged before running it: its sequence number (from 0), its
    kind (ALLREDUCE, BROADCAST...) and its first tensor's shape."""

    seq: int
    op: str
    shape: tuple[int, ...]


@dataclass
class RankLog:
    """What one rank's lines say: the store it reached (None if it never did) and its calls."""

    store: str | None = None
    calls: list[Call] = field(default_factory=list)


def read(log: str) -> dict[int, RankLog]:
    """Each rank's store and calls, from a log whose lines are tagged `[rank<r>] `."""
    ranks: dict[int, RankLog] = {}
    for line in log.splitlines():
        tagged = TAG.match(line)
        if not tagged:
            continue
        rank = ranks.setdefault(int(tagged["rank"]), RankLog())
        if store := STORE.search(tagged["text"]):
            rank.store = store["store"]
        elif call := CALL.search(tagged["text"]):
            shape = tuple(
                int(n) for n in call["shape"].replace(" ", "").split(",") if n
            )
            rank.calls.append(Call(int(call["seq"]), call["op"], shape))
    return dict(sorted(ranks.items()))


def first_difference(ranks: dict[int, RankLog]) -> int | None:
    """The first position at which the ranks' calls differ (in kind or shape), or where one
    rank's list ends before another's; None if every rank called the same."""
    lists = [r.calls for r in ranks.values()]
    longest = max((len(calls) for calls in lists), default=0)
    for i in range(longest):
        called = {calls[i] if i < len(calls) else None for calls in lists}
        if len(called) > 1:
            return i
    return None
