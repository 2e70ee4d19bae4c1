"""ZeRO's collectives held in flight (zerobook.data_parallel.inflight): an asynchronous reduce-scatter or
all-gather holds NaN in its output until wait(), which puts the rank-order result in; an
all-gather whose input is its own output's piece (FSDP2's in-place layout) works too.

Reported by every rank: what each output held before and after wait(), and the events.
"""

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.inflight import InFlight
from zerobook.train.parity import ordered_sums

me = zb.setup()
n = me.world_size
full = torch.arange(2 * n, dtype=torch.float32) + 10 * me.rank
with ordered_sums(), InFlight() as flight:
    shard = torch.full((2,), -1.0)
    work = dist.reduce_scatter_tensor(shard, full, async_op=True)
    before_rs = shard.tolist()
    work.wait()
    gathered = torch.zeros(2 * n)
    work = dist.all_gather_into_tensor(gathered, shard, async_op=True)
    before_ag = gathered.tolist()
    work.wait()
    blocking = torch.zeros(2 * n)
    dist.all_gather_into_tensor(blocking, shard)
    inplace = torch.zeros(2 * n)
    inplace[2 * me.rank : 2 * me.rank + 2] = shard
    own = inplace[2 * me.rank : 2 * me.rank + 2]
    dist.all_gather_into_tensor(inplace, own, async_op=True).wait()
zb.report(
    before_rs=before_rs,
    shard=shard.tolist(),
    before_ag=before_ag,
    gathered=gathered.tolist(),
    blocking=blocking.tolist(),
    inplace=inplace.tolist(),
    events=flight.events,
)
