"""A record of collectives kept by zerobook.data_parallel.inflight, reported raw; with --rewrite, rewritten at
the end as a forger would (an all-reduce moved before a gradient's note, the counts beside it
made up so that they still only rise)."""

import sys

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.inflight import InFlight

me = zb.setup(verbose=False)
with InFlight() as flight:
    flight.note("grad", "a")
    flight.note("grad", "b")
    dist.all_reduce(torch.ones(3))
    flight.note("finish")
if "--rewrite" in sys.argv:
    flight.events.insert(
        1, flight.events.pop(2)
    )  # started before b's gradient arrived?
    first = flight.counts[0]
    flight.counts[:] = [first, first + 1, first + 1, first + 1]  # still rising
zb.report(record=flight.record(), tampered=flight.tampered())
