"""ZeRO from scratch, stage by stage, each building on the one before (by import, not by copy).

flat.py    one flat buffer of parameters (and one of gradients), padded to N equal shards
master.py  the fp32 master shard and AdamW over it, with global-norm clipping (every stage)
stage1.py  ZeRO-1: shard the fp32 master weights and AdamW's moments
stage2.py  ZeRO-2: also shard the gradients, reduce-scattered bucket by bucket in backward
units.py   ZeRO-3's unit: a module's parameters as a shard, gathered only while in use;
           in_backward (a forward run inside backward is a recomputation)
stage3.py  ZeRO-3 (FSDP): shard the parameters too, gathered and freed unit by unit (Zero3
           takes any torch.optim optimizer; Zero3AdamW is it with AdamW)
prefetch.py  which unit to gather ahead, and the limit on units gathered (Prefetch)
timeline.py  ZeRO-3's events as typed records (Event), their Gantt bars, profiler ranges
sharded_optimizer.py  ZeRO-1 over any torch.optim optimizer (like ZeroRedundancyOptimizer)
offload.py   ZeRO-3's units kept in host memory, copied in ahead of use (ZeRO-Infinity's idea)
quantized.py ZeRO++'s qwZ: a unit whose all-gathers send int8 blocks and their scales
hpz.py       ZeRO++'s hpZ: a unit that keeps a node's share after forward for backward's gather
qgz.py       ZeRO++'s qgZ: a unit whose gradients go through two all-to-alls of int4
trials.py    the short trainings the ZeRO++ runs share (a small GPT on real text, loss per step)
"""

from zerobook.zero.flat import FlatParams
from zerobook.zero.prefetch import Prefetch
from zerobook.zero.sharded_optimizer import ShardedOptimizer
from zerobook.zero.stage1 import Zero1AdamW
from zerobook.zero.stage2 import Zero2AdamW
from zerobook.zero.stage3 import Zero3, Zero3AdamW
from zerobook.zero.timeline import Event

__all__ = [
    "Event",
    "FlatParams",
    "Prefetch",
    "ShardedOptimizer",
    "Zero1AdamW",
    "Zero2AdamW",
    "Zero3",
    "Zero3AdamW",
]
