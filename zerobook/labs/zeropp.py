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
Each stage (quantizer, gather, group_gather, node, backward, secondary, train) runs on its own:
a stage that raises is reported as failed (zerobook.labs.crash) and the others still run (after
one whose ranks disagree, only those that need no peer). Each stage reads one function, given
the harness's own inputs (backward's gather starts from the harness's piece, not the
student's), so a mistake loses the parts that need it and no other.
The ranks run as two nodes of two; the last stage trains the course's GPT under our ZeRO-3 with
the student's gathers in its units, beside ZeRO-3's own. The harness records what it measured, raw: each block's
error against the values it came from, every collective's bytes and group (CommMeter), the
storage a kept piece holds; zerobook.labs.zeropp_checks judges it in the notebook.
"""

import math
import sysconfig
from pathlib import Path

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.data_parallel.inflight import every_group_count
from zerobook.labs import hints
from zerobook.labs.crash import Steps, run_store
from zerobook.labs.harness import call_student, lab_params, load_student
from zerobook.labs.harness import parse_args, refuse
from zerobook.labs.new_groups import NewGroups
from zerobook.launcher.dist import collective_timeout
from zerobook.train import text
from zerobook.train.models import next_token_loss
from zerobook.zero import trials
from zerobook.zero.units import Unit, in_backward

PARTS = ("zeropp",)
PARAMS = lab_params(seed=2306, block=64)  # an instructor may grade with others
SEED, BLOCK = PARAMS["seed"], PARAMS["block"]
NODE = 2  # ranks per node: 4 ranks are two nodes
SIZE = 1000  # elements of the quantizer's tensor, and of each rank's shard (not a multiple)
STEPS, ROWS = (
    12,
    4,
)  # the short training: steps, and windows of real text per rank a step


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
    bad = [k for k, x in enumerate(scales.tolist()) if not 0 < x < float("inf")]
    return {"codes": described(codes), "scales": described(scales), "bad_scales": bad,
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


def gather(student, me: zb.Rank, group=None) -> dict:
    """quantized_all_gather of this rank's bf16 shard, over every rank (`group` None, not
    passed) or over `group`: its collectives, and each member's piece of the result against
    the shard that member holds (the harness makes every rank's)."""
    members = (
        range(me.world_size) if group is None else dist.get_process_group_ranks(group)
    )
    shards = [weights(SEED + 1 + r, SIZE, torch.bfloat16) for r in members]
    mine = shards[list(members).index(me.rank)]
    args = (mine.clone(), BLOCK) + (() if group is None else (group,))
    full, sent = metered(student, "quantized_all_gather", *args)
    got = full.reshape(-1).to("cpu") if isinstance(full, torch.Tensor) else None
    pieces, own = [], []  # each piece against its rank's shard, and against this rank's
    if got is not None and got.numel() == SIZE * len(shards):
        pieces = [block_errors(p, s) for p, s in zip(got.split(SIZE), shards)]
        own = [block_errors(p, mine) for p in got.split(SIZE)]
    return {**sent, "full": described(full), "pieces": pieces, "against_own": own,
            "members": list(members), "index": list(members).index(me.rank)}  # fmt: skip


def node(student, me: zb.Rank) -> dict:
    """node_group(NODE): the global ranks of the group it returned; `made`: the groups it
    made (dist.new_group calls, each checked across ranks: zerobook.labs.new_groups),
    `local`: whether one asked for use_local_synchronization (only members take part)."""
    with NewGroups(run_store(), me.rank, me.world_size, collective_timeout()) as made:
        group = call_student(student, "node_group", NODE)
    out = {"made": len(made.calls), "local": any(local for _, local in made.calls)}
    if not isinstance(group, dist.ProcessGroup):
        return {"ranks": None, "type": type(group).__name__, **out}
    return {"ranks": dist.get_process_group_ranks(group), **out}


def secondary(student, me: zb.Rank, group) -> dict:
    """secondary_piece of the full bf16 weights over the harness's own node group: the piece
    (bit for bit against the node's share of this rank, and the storage it keeps alive)."""
    full = weights(SEED + 9, SIZE * me.world_size, torch.bfloat16)
    piece = call_student(student, "secondary_piece", full.clone(), group)
    where = me.rank % NODE
    want = full.view(NODE, -1)[where]
    ok = isinstance(piece, torch.Tensor) and piece.shape == want.shape
    return {"kept": {"piece": described(piece), "equal": ok and torch.equal(piece, want),
                     "storage": piece.untyped_storage().nbytes() if ok else None,
                     "bytes": want.numel() * want.element_size(), "node_rank": where}}  # fmt: skip


def backward(student, me: zb.Rank, group) -> dict:
    """secondary_gather over the harness's own node group, from the piece the harness keeps
    (this rank's share of the node's, a copy): its collectives, the weights it rebuilt."""
    full = weights(SEED + 9, SIZE * me.world_size, torch.bfloat16)
    piece = full.view(NODE, -1)[me.rank % NODE].clone()
    back, sent = metered(student, "secondary_gather", piece, group)
    rebuilt = isinstance(back, torch.Tensor) and back.shape == full.shape
    return {**sent, "full": described(back),
            "equal": rebuilt and torch.equal(back.cpu(), full),
            "full_bytes": full.numel() * full.element_size()}  # fmt: skip


def yours(student, group):
    """A unit class for our ZeRO-3 whose gathers are the student's: forward's the quantized
    all-gather; after forward a block keeps secondary_piece of its full weights (given a
    copy), and backward rebuilds them with secondary_gather (zerobook.zero.hpz's schedule)."""

    class Yours(Unit):
        secondary, for_forward = None, False

        def free(self) -> None:
            keep = self.name != "root" and self.for_forward and self.gathered
            full = (
                self.flat.flat.detach().clone() if keep and not in_backward() else None
            )
            self.secondary = None
            if full is not None:
                self.secondary = call_student(student, "secondary_piece", full, group)
            self.for_forward = False
            super().free()

        @torch.no_grad()
        def start_gather(self):
            if self.gathered or self.pending is not None:
                return
            name = "quantized_all_gather"
            if in_backward() and self.secondary is not None:
                name = "secondary_gather"
                full = call_student(student, name, self.secondary, group)
            else:
                self.for_forward = not in_backward()
                full = call_student(student, name, self.shard, BLOCK)
            numel = self.flat.flat.numel()
            if not isinstance(full, torch.Tensor) or full.numel() != numel:
                raise ValueError(f"in training, {name} returned {described(full)} for "
                                 f"{self.name}'s {numel} elements (its full weights)")  # fmt: skip
            self.flat.flat.untyped_storage().resize_(self.full_bytes)
            self.gathers += 1
            self.flat.flat.copy_(full.reshape(-1))

    return Yours


def train(student, me: zb.Rank, group) -> dict:
    """STEPS steps of the course's bf16 GPT on real text (asyncio's sources) under our ZeRO-3,
    twice from one seed: its own units, then the student's (`yours`). Each step's loss, in
    bits per byte; in step 0, every collective by group, and the bytes each block's kept
    piece held when forward ended (its padded size for the share it stands for)."""
    data = text.load(Path(sysconfig.get_paths()["stdlib"]) / "asyncio")[0]
    curves, first = {}, {}
    for way, unit_cls in {"ZeRO-3": None, "yours": yours(student, group)}.items():
        model, zero = trials.zero3(unit_cls, me.device)
        curve = []
        for step in range(STEPS):
            with CommMeter() as meter:
                loss = next_token_loss(model, trials.batch(data, step, me, ROWS))
                held = {u.name: u.secondary.untyped_storage().nbytes()
                        for u in zero.units if getattr(u, "secondary", None) is not None}  # fmt: skip
                loss.backward()
                zero.step()
                zero.zero_grad()
            if step == 0:
                first[way] = {"sent": meter.summary(by_group=True), "held": held}
            curve.append(loss.item() / math.log(2))
        curves[way] = curve
    padded = {u.name: u.flat.padded for u in zero.units}
    return {"curves": curves, "first": first, "padded": padded, "element_size": 2}


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
    own = node_of(me)  # before the student's file: its groups are its own
    student = load_student(cli.student)
    stages = {"quantizer": lambda: quantizer(student, me),
              "gather": lambda: gather(student, me),
              "group_gather": lambda: gather(student, me, own),
              "node": lambda: node(student, me),
              "backward": lambda: backward(student, me, own),
              "secondary": lambda: secondary(student, me, own),
              "train": lambda: train(student, me, own)}  # fmt: skip
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
    refuse("your ZeRO++")
    zb.report(**report, failed_stages=failed, rank=me.rank, world_size=me.world_size, node_size=NODE,
              block=BLOCK, size=SIZE, seed=SEED)  # fmt: skip


if __name__ == "__main__":
    main()
