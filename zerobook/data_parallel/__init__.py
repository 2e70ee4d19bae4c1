"""data_parallel: data parallelism from scratch, and what measures it — replicate the model,
split the batch, average the gradients, by the course's own collectives. Rank side.

    ddp          the average after backward (one all-reduce per parameter), and
                 OverlappedAllReduce: buckets filled by post-accumulate-grad hooks and
                 all-reduced in flight during backward, as PyTorch's DDP does
    collectives  ring reduce-scatter, all-gather and all-reduce from sends and receives
    comm         CommMeter: every collective and send/receive a rank makes, its bytes counted
                 (point to point exactly; built-in collectives the way nccl-tests reports them)
    inflight     asynchronous collectives whose result lands only at wait(), and a step's
                 events in order (what the DDP and ZeRO labs grade)

Old names still work (zerobook/_moved.py): zerobook.ddp, zerobook.collectives, zerobook.comm and
zerobook.inflight are these modules.
"""

from zerobook._lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
