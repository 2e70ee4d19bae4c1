"""The step model: DDP and ZeRO-1/2/3 (and HSDP) as a program of computation and collectives,
scheduled on two streams, computation and communication, and under HSDP a third: FSDP2 runs the
replicas' all-reduce on a stream of its own, beside the next unit's reduce-scatter and all-gather
("collectives use different network resources and can overlap in the typical intra-node
sharding / inter-node replication case": torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py,
`all_reduce_stream`). The model follows it where that holds — a shard group inside a node, its
collectives on NVLink, the all-reduce through the NICs; a shard group across nodes shares the
NICs with the all-reduce, so there it runs after them on the one communication stream.

Times: a block's forward is its FLOPs over the sustained rate (hardware.peak_flops x
hardware.sustained), its backward twice that (plus a forward again under full recomputation); a
collective is priced as NCCL runs it (zerobook.perfmodel.collectives: its algorithm and protocol
for that size, over the links of the rank layout): DDP's all-reduce over every rank, ZeRO's
all-gathers and reduce-scatters over the shard group (consecutive ranks: whole nodes, or a part
of one), HSDP's all-reduce over the replicas (one rank per node, or G/g of them). Where
hardware.reduce_scatter is a number, a reduce-scatter takes that multiple of an all-reduce's
time (gloo's is an all-reduce and copies). Gradients are reduced one collective per unit (FSDP's
way), or, given `bucket_params`, in buckets of that many as backward fills them (DDP's and our
ZeRO-1/2's way: a bucket's latency is paid per bucket). The optimizer's step reads and writes
every shard element's 28 bytes (fp32 master, momentum and variance, the gradient, the 16-bit
copy) at HBM bandwidth. Weights travel in element_bytes, gradients in reduce_bytes (fp32: 4).
With k micro-batches per step, forward and backward run k times (stage 3 gathering in each),
the gradients reduced after each or the last (GRAD_SYNC), one optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass

from zerobook.perfmodel.accumulation import grad_syncs
from zerobook.perfmodel.collectives import collective_seconds
from zerobook.perfmodel.schedule import Program
from zerobook.perfmodel.zeropp import QWZ_BYTES, qgz_seconds, quantize_seconds

OPTIMIZER_BYTES_PER_ELEMENT = 28  # read master, m, v (12) + 16-bit grad (2); write master, m, v (12) + 16-bit copy (2)


@dataclass(frozen=True)
class Layout:
    """Who communicates with whom: N ranks, g per node, shards over groups of G (HSDP: N/G
    replicas of each shard group)."""

    world_size: int
    gpus_per_node: int
    shard_group: int

    @property
    def replicas(self) -> int:
        return self.world_size // self.shard_group

    @property
    def replica_stream(self) -> str:
        """Where HSDP's all-reduce runs: its own stream ("replicas", FSDP2's all_reduce_stream)
        while the shard group's collectives stay in a node (other links); else after them, on
        the communication stream (both through the NICs)."""
        return "replicas" if self.shard_group <= self.gpus_per_node else "communication"

    def group(self, kind: str) -> tuple[int, int]:
        """(ranks, ranks per node) of a collective: DDP's all-reduce over every rank; ZeRO's
        all-gathers and reduce-scatters over a shard group of consecutive ranks; ("replicas")
        HSDP's all-reduce over the ranks holding the same shard, one in each G consecutive."""
        n, g, group = self.world_size, self.gpus_per_node, self.shard_group
        if kind == "all_reduce":
            return n, min(n, g)
        if kind == "replicas":
            return self.replicas, max(1, g // group)
        return group, min(group, g)


def bucket_sizes(params: int, bucket_params: int) -> list[int]:
    """`params` elements cut into buckets of `bucket_params` (the last one what is left)."""
    full, rest = divmod(params, bucket_params)
    return [bucket_params] * full + ([rest] if rest else [])


class StepProgram:
    """Builds one step's program for a stage; `unit_bytes` and `compute` give sizes and times."""

    def __init__(
        self,
        spec,
        hardware,
        layout: Layout,
        stage: int,
        times: dict,
        element_bytes: int,
        prefetch: bool,
        bucket_params: int | None = None,
        param_gather: str = "after_step",
        reduce_bytes: int | None = None,
        micro_batches: int = 1,
        grad_sync: str | None = None,
        zeropp: frozenset = frozenset(),
        quantizer: str = "unfused",
    ):
        self.spec, self.hardware, self.layout, self.stage = (
            spec,
            hardware,
            layout,
            stage,
        )
        self.times, self.element_bytes, self.prefetch = times, element_bytes, prefetch
        self.bucket_params = None if stage == 3 else bucket_params
        # stages 1-2: the updated weights' all-gather after the optimizer step ("after_step",
        # DeepSpeed's and ours) or block by block just ahead of the next forward ("next_forward",
        # Megatron's distributed optimizer with overlap_param_gather)
        self.ahead = stage in (1, 2) and param_gather == "next_forward"
        # gradients reduced in reduce_bytes per element (fp32: 4), weights sent in element_bytes;
        # the micro-batches whose backward reduces
        self.reduce_bytes = reduce_bytes or element_bytes
        self.syncs = grad_syncs(stage, micro_batches, grad_sync)
        self.zeropp, self.quantizer = zeropp, quantizer  # ZeRO++'s parts, qwZ's passes
        self.program = Program(hardware.overlap)

    def seconds(self, kind: str, size: float, node: bool = False) -> float:
        """One collective of `size` bytes over its group ("replicas": HSDP's all-reduce; `node`:
        the GPUs of one node, hpZ's); a reduce-scatter at hardware.reduce_scatter x an
        all-reduce of its group, where set."""
        ranks, per_node = self.layout.group(kind)
        if node:
            ranks = per_node = min(ranks, self.layout.gpus_per_node)
        kind = "all_reduce" if kind == "replicas" else kind
        ratio = self.hardware.reduce_scatter
        if kind == "reduce_scatter" and ratio is not None:
            kind, times = "all_reduce", ratio
        else:
            times = 1
        return times * collective_seconds(
            kind, size, world_size=ranks, gpus_per_node=per_node, hardware=self.hardware
        )

    def collective(self, kind, unit, params, *deps, each=None, node=False):
        """A collective of `params` elements (`each` bytes, else the dtype's): DDP's all-reduce
        over every rank, ZeRO's all-gather and reduce-scatter over the shard group (`node`: a
        node's GPUs) and, under HSDP, an all-reduce of the shard over the replicas. With qgZ a
        reduce-scatter is its two all-to-alls of int4 gradients; a gather of qwZ's int8 weights
        lasts its quantize and dequantize passes too, run on the gathers' stream as DeepSpeed runs
        them (zeropp.quantize_seconds)."""
        if kind == "reduce_scatter" and "qgZ" in self.zeropp:
            after, group = deps, self.layout.group(kind)
            for what, seconds in qgz_seconds(params, *group, self.hardware):
                op = self.program.add("communication", what, unit, seconds, *after)
                after = [("end", op)]
            return op
        each = each or (
            self.element_bytes if kind == "all_gather" else self.reduce_bytes
        )
        size = params * each
        seconds = self.seconds(kind, size, node)
        if kind == "all_gather" and each == QWZ_BYTES:
            ranks = self.layout.group(kind)[0]
            ranks = min(ranks, self.layout.gpus_per_node) if node else ranks
            seconds += quantize_seconds(params, ranks, self.hardware, self.quantizer)
        op = self.program.add(
            "communication", kind.replace("_", "-"), unit, seconds, *deps
        )
        if kind == "reduce_scatter" and self.layout.replicas > 1:
            across = self.seconds("replicas", size / self.layout.shard_group)
            op = self.program.add(
                self.layout.replica_stream,
                "all-reduce (replicas)",
                unit,
                across,
                ("end", op),
            )
        return op

    def compute(self, what: str, unit: str, seconds: float, *deps):
        return self.program.add("compute", what, unit, seconds, *deps)

    def forward(self, after=None, first: bool = True) -> list:
        """Forward: (stage 3) gather each block, compute, free; the root kept throughout.
        (Stages 1-2 with the gather ahead: the last step's updated weights, gathered the same
        way, each block's issued when the block before it starts: the first micro-batch only.)
        A later micro-batch's first gathers are issued when `after` (the last backward) ends."""
        t, blocks, ops = self.times, self.spec.layers, []
        previous, start = None, [("end", after)] if after else []
        gathers = self.stage == 3 or (self.ahead and first)
        gather_root = (
            self.collective(
                "all_gather",
                "root",
                self.spec.root_params(),
                *start,
                each=self.quantized,
            )  # fmt: skip
            if gathers
            else None
        )
        for k in range(blocks):
            deps = [("end", previous)] if previous else []
            if gathers:
                issue = (
                    start
                    if previous is None
                    else [("start" if self.prefetch or self.ahead else "end", previous)]
                )
                gather = self.collective(
                    "all_gather", f"blocks.{k}", self.spec.block_params(), *issue,
                    each=self.quantized,
                )  # fmt: skip
                deps.append(("end", gather))
                if gather_root is not None and k == 0:
                    deps.append(("end", gather_root))
            previous = self.compute("forward", f"blocks.{k}", t["block_forward"], *deps)
            ops.append(previous)
        return ops + [
            self.compute("forward", "root", t["root_forward"], ("end", previous))
        ]

    def backward(self, last_forward, sync: bool = True) -> list:
        """Backward, last block first: (stage 3) gather again — with prefetch issued when the
        block after it starts its backward, so it goes before that block's reduce-scatter —
        compute, reduce; DDP all-reduces and ZeRO-1/2 reduce-scatter each block's gradients as
        soon as they are ready. One communication stream: a reduce-scatter and a gather do not
        share the links at once (FSDP2 gives them two streams; the bandwidth is shared anyway).
        Without `sync` (a micro-batch before the last, gradients accumulated) nothing is reduced.
        Returns the reductions and the last computation."""
        t, blocks = self.times, self.spec.layers
        previous = self.compute(
            "backward", "root", t["root_backward"], ("end", last_forward)
        )
        self.reduces, self.pending, self.sync = [], 0, sync
        gather = self.regather(blocks - 1, previous)
        for k in reversed(range(blocks)):
            deps = [("end", previous)] + ([("end", gather)] if gather else [])
            previous = self.compute(
                "backward", f"blocks.{k}", t["block_backward"], *deps
            )
            gather = self.regather(k - 1, previous) if self.prefetch else None
            self.reduce(f"blocks.{k}", self.spec.block_params(), previous)
            if not self.prefetch:
                gather = self.regather(k - 1, previous)
        self.reduce("root", self.spec.root_params(), previous, last=True)
        return self.reduces, previous

    def reduce(self, unit: str, params: int, ready, last: bool = False) -> None:
        """The gradients of `unit` are ready when `ready` ends: reduce them (all-reduce for DDP,
        reduce-scatter for ZeRO), as one collective, or into buckets — a full bucket goes at
        once, the last partial one after the last unit."""
        if not self.sync:
            return
        kind = "all_reduce" if self.stage == 0 else "reduce_scatter"
        if self.bucket_params is None:
            self.reduces.append(self.collective(kind, unit, params, ("end", ready)))
            return
        self.pending += params
        while self.pending >= self.bucket_params or (last and self.pending):
            size = min(self.pending, self.bucket_params)
            self.reduces.append(
                self.collective(
                    kind, f"bucket {len(self.reduces)}", size, ("end", ready)
                )
            )
            self.pending -= size

    def regather(self, k: int, previous):
        """Stage 3's backward all-gather of block k, issued when `previous` starts (prefetch) or
        ends; nothing to do for other stages, or before block 0. hpZ's reads the node's
        secondary shards, quantized under qwZ too (DeepSpeed quantizes every fetch)."""
        if self.stage != 3 or k < 0:
            return None
        issue = ("start" if self.prefetch else "end", previous)
        hpz = "hpZ" in self.zeropp  # the secondary shards, in the node
        return self.collective("all_gather", f"blocks.{k}", self.spec.block_params(), issue,
                               each=self.quantized, node=hpz)  # fmt: skip

    @property
    def quantized(self):
        """qwZ's bytes per element of a weights' all-gather, or None (the dtype's)."""
        return QWZ_BYTES if "qwZ" in self.zeropp else None

    def build(self) -> Program:
        reduces, last = [], None
        for m, sync in enumerate(self.syncs):
            forward = self.forward(last, first=m == 0)
            reduced, last = self.backward(forward[-1], sync)
            reduces += reduced
        step = self.compute(
            "optimizer step",
            "all",
            self.times["optimizer"],
            *[("end", r) for r in reduces],
        )
        if self.stage in (1, 2) and not self.ahead:
            # the updated 16-bit shards back to every rank of the group
            for b, size in enumerate(
                bucket_sizes(
                    self.spec.num_params(), self.bucket_params or self.spec.num_params()
                )
            ):
                self.collective(
                    "all_gather",
                    f"bucket {b}" if self.bucket_params else "all",
                    size,
                    ("end", step),
                )
        return self.program
