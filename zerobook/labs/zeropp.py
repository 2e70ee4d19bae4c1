"""Lab 9 harness: the student's qwZ and hpZ (ZeRO++), graded from one launch on 4 ranks.

    python -m torch.distributed.run --standalone --nproc-per-node 4 \
        -m zerobook.labs.zeropp --student zeropp_student.py --part zeropp

The student's file defines
    quantize(values, block) -> (codes, scales)      int8 codes, one fp32 scale per block
    dequantize(codes, scales, numel, dtype)         the values the codes stand for
    quantized_all_gather(shard, block, group=None)  every rank's shard, sent quantized
    node_group(node_size)                           the process group of this rank's node
    secondary_piece(full, group)                    this rank's 1/g of the full weights, kept
    secondary_gather(piece, group)                  the full weights from the node's pieces
Each stage runs on its own: a stage that raises is reported as failed (zerobook.labs.crash)
and the others still run (after one whose ranks disagree, only those that need no peer).
The ranks run as two nodes of two. The harness records what it measured, raw: each block's
error against the values it came from, every collective's bytes and group (CommMeter), the
storage a kept piece holds; zerobook.labs.zeropp_checks judges it in the notebook.
"""

import sys

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.data_parallel.inflight import every_group_count
from zerobook.labs import hints
from zerobook.labs.crash import Steps
from zerobook.labs.harness import call_student, forbid, lab_params, load_student
from zerobook.labs.harness import parse_args, refuse, trusted

PARTS = ["zeropp"]
PARAMS = lab_params(seed=2306, block=64)  # an instructor may grade with others
SEED, BLOCK = PARAMS["seed"], PARAMS["block"]
NODE = 2  # ranks per node: 4 ranks are two nodes
SIZE = 1000  # elements of the quantizer's tensor, and of each rank's shard (not a multiple)
# the course's qwZ, hpZ and qgZ (zerobook.zero.quantized, .hpz, .qgz) and its checks
FORBIDDEN = ("zerobook.zero", "zerobook.labs.zeropp_checks")
UNSEEN = ("zerobook.zero", "zerobook.labs.zeropp_checks")  # hidden while graded


def weights(seed: int, size: int, dtype=torch.float32) -> torch.Tensor:
    """`size` values whose blocks of BLOCK differ in scale by up to 10^4 (as layers' weights
    do), with one block of zeros and one outlier ten times its block's largest value."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(size, generator=generator)
    blocks = -(-size // BLOCK)
    scale = 10.0 ** torch.randint(-4, 1, (blocks,), generator=generator).float()
    values *= scale.repeat_interleave(BLOCK)[:size]
    values[BLOCK : 2 * BLOCK] = 0.0
    values[3 * BLOCK + 5] = 10 * values[3 * BLOCK : 4 * BLOCK].abs().max()
    return values.to(dtype)


def block_errors(got: torch.Tensor, want: torch.Tensor) -> list[dict]:
    """Per block of BLOCK elements: the largest |got - want| and the largest |want|, in
    float64 (each bound is the checks' to derive)."""
    error = (got.double() - want.double()).abs().split(BLOCK)
    largest = want.double().abs().split(BLOCK)
    return [
        {"error": e.max().item(), "largest": w.max().item()}
        for e, w in zip(error, largest)
    ]


def described(tensor) -> dict:
    """What a returned tensor is: its dtype, number of elements, shape (or its type)."""
    if not isinstance(tensor, torch.Tensor):
        return {"type": type(tensor).__name__}
    return {"dtype": str(tensor.dtype).split(".")[-1], "numel": tensor.numel(),
            "shape": list(tensor.shape)}  # fmt: skip


def quantizer(student, me: zb.Rank) -> dict:
    """quantize, then dequantize, SIZE fp32 values: what each returned, each block's error."""
    values = weights(SEED, SIZE)
    codes, scales = call_student(student, "quantize", values.clone(), BLOCK)
    back = call_student(student, "dequantize", codes, scales, SIZE, torch.float32)
    return {"codes": described(codes), "scales": described(scales),
            "back": described(back), "one_scale": scales.numel() == 1,
            "blocks": block_errors(back.reshape(-1)[:SIZE], values)}  # fmt: skip


def metered(student, name: str, *args):
    """The student's function called under the meter: its result, each collective it ran
    (operation, bytes S, group), and the operations the meter did not see."""
    before = every_group_count()
    with CommMeter() as meter:
        result = call_student(student, name, *args)
    seen = [{"op": e.op, "bytes": e.bytes, "ranks": e.ranks} for e in meter.events]
    unseen = every_group_count() - before - len(seen) if before >= 0 else 0
    return result, {"collectives": seen, "unseen": max(unseen, 0)}


def gather(student, me: zb.Rank) -> dict:
    """quantized_all_gather of this rank's bf16 shard: its collectives, and each rank's piece
    of the result against the shard that rank holds (the harness makes every rank's)."""
    shards = [weights(SEED + 1 + r, SIZE, torch.bfloat16) for r in range(me.world_size)]
    full, sent = metered(
        student, "quantized_all_gather", shards[me.rank].clone(), BLOCK
    )
    got = full.reshape(-1).to("cpu") if isinstance(full, torch.Tensor) else None
    pieces = []
    if got is not None and got.numel() == SIZE * me.world_size:
        pieces = [block_errors(p, s) for p, s in zip(got.split(SIZE), shards)]
    return {**sent, "full": described(full), "pieces": pieces}


def node(student, me: zb.Rank) -> dict:
    """node_group(NODE): the global ranks of the group it returned."""
    group = call_student(student, "node_group", NODE)
    if not isinstance(group, dist.ProcessGroup):
        return {"ranks": None, "type": type(group).__name__}
    return {"ranks": dist.get_process_group_ranks(group)}


def secondary(student, me: zb.Rank, group) -> dict:
    """secondary_piece of the full bf16 weights over the harness's own node group, then
    secondary_gather of it: the piece (bit for bit, and the storage it keeps alive), the
    gather's collectives, the weights it rebuilt."""
    full = weights(SEED + 9, SIZE * me.world_size, torch.bfloat16)
    piece = call_student(student, "secondary_piece", full.clone(), group)
    where = me.rank % NODE
    want = full.view(NODE, -1)[where]
    ok = isinstance(piece, torch.Tensor) and piece.shape == want.shape
    kept = {"piece": described(piece), "equal": ok and torch.equal(piece, want),
            "storage": piece.untyped_storage().nbytes() if ok else None,
            "bytes": want.numel() * want.element_size(), "node_rank": where}  # fmt: skip
    if not ok:
        return {"kept": kept}
    back, sent = metered(student, "secondary_gather", piece, group)
    rebuilt = isinstance(back, torch.Tensor) and back.shape == full.shape
    return {"kept": kept, **sent, "full": described(back),
            "equal": rebuilt and torch.equal(back.cpu(), full),
            "full_bytes": full.numel() * full.element_size()}  # fmt: skip


def node_of(me: zb.Rank):
    """The harness's own group of this rank's node (every rank makes every node's group)."""
    groups = [
        dist.new_group(list(range(s, s + NODE))) for s in range(0, me.world_size, NODE)
    ]
    return groups[me.rank // NODE]


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    if me.world_size % NODE:
        raise SystemExit(
            f"the lab runs as nodes of {NODE}: launch a multiple of {NODE} ranks"
        )
    files = forbid(FORBIDDEN)
    own = node_of(me)  # before the student's file: its groups are its own
    # what the record depends on, as it is before the student's file runs
    measured = ("weights", "block_errors", "described", "metered")
    record = trusted(CommMeter, **dict.fromkeys(measured, sys.modules[__name__]))
    student = load_student(cli.student)
    stages = {"quantizer": lambda: quantizer(student, me),
              "gather": lambda: gather(student, me),
              "node": lambda: node(student, me),
              "secondary": lambda: secondary(student, me, own)}  # fmt: skip
    report, failed, apart = {}, {}, None
    for stage, run in stages.items():
        if apart:  # not run: a peer may still wait in that stage's collective
            failed[stage] = {"step": stage, "skipped": apart}
            continue
        steps = Steps(me.rank, cli.student, hints.zeropp(me.world_size, BLOCK))
        with steps.at(stage):
            report[stage] = run()
        if steps.failed:  # this rank's own failure: its stage is not checked
            failed[stage] = steps.failed
            report.pop(stage, None)
        if not steps.agree(stage) and stage != "quantizer" and not steps.alike:
            apart = stage  # what this rank measured still counts; the next stages wait
    refuse("your ZeRO++", record, student=student, files=files)
    zb.report(**report, failed_stages=failed, rank=me.rank, world_size=me.world_size, node_size=NODE,
              block=BLOCK, size=SIZE, seed=SEED)  # fmt: skip


if __name__ == "__main__":
    main()
