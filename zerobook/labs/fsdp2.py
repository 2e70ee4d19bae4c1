"""Lab 6 harness: the student's production set-up — PyTorch's FSDP2 with mixed precision,
prefetch and DCP checkpoints — graded against our ZeRO-3.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.labs.fsdp2 --student fsdp2_student.py --part parity

The student's file defines
    shard(model, mesh, reduce_dtype) fully_shard every Block and then the root, bf16 compute,
                                     gradients reduce-scattered in reduce_dtype
    prefetch(model)                  explicit forward (block k -> k+1) and backward (k -> k-1) prefetch
    save(model, optimizer, path)     a DCP checkpoint of weights and optimizer state
    load(model, optimizer, path)     read it back into this run's shards
Parts: `parity` (5 steps with bf16 reductions, losses and weights against our Zero3AdamW in bf16,
every sum in rank order: equal for a correct set-up), `memory` (bytes kept per rank after a step;
which modules are FSDP units), `traffic` (bytes per collective of a step, against ours, with
reduce_dtype bf16 and fp32), `precision` (the trade-off: how far bf16- and fp32-reduced gradients
are from float64-reduced ones, and the bytes each reduce-scatter moves), `prefetch` (how many all-gathers were issued when each block's forward began),
`checkpoint` (2 steps, the learning rate halved, save; load into a fresh model: state digests,
learning rate and next loss; what a fresh process finds on disk; whether a load restores a copy).
`--part parity,memory,...` runs several in one launch and reports `parts`: each part's report,
or `{"raised": ...}` for a part that raised (the others still run).
"""

import shutil
import tempfile
from functools import partial
from pathlib import Path

import torch
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.fsdp import FSDPModule

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.fsdp2 import full_weights, kept_bytes, local, mesh_of
from zerobook.labs import checkpoint_readback as readback
from zerobook.labs import crash, hints
from zerobook.labs.harness import call_student, frozen, import_again, load_student
from zerobook.labs.harness import parse_args
from zerobook.trust import plain_objects
from zerobook.train.models import GPT, Block, GPTConfig, next_token_loss, random_batch
from zerobook.train.parity import ordered_sums
from zerobook.train.sharded_checkpoint import state_digests, tensor_digests
from zerobook.train.training import rank_batch, train_step
from zerobook.zero import Zero3AdamW

PARTS = ("parity", "memory", "traffic", "precision", "prefetch", "checkpoint")
REDUCE_DTYPES = frozen({"bf16": torch.bfloat16, "fp32": torch.float32})
CONFIG = GPTConfig(vocab=128, hidden=64, layers=3, heads=4, seq_len=32)
LR, STEPS, BATCH = 1e-3, 5, 4


class NotUnits(RuntimeError):
    """shard() left a block or the root without fully_shard."""


def student_model(student, me: zb.Rank, reduce_dtype=torch.bfloat16):
    """The student's FSDP2 model (from the same bf16-representable weights as ours), its gradients
    reduced in `reduce_dtype` (ours reduces in bf16), and AdamW. Every block and the root must
    be FSDP units before anything runs (else torch fails inside, an AttributeError of its own)."""
    torch.manual_seed(0)
    model = GPT(CONFIG).to(torch.bfloat16).float().to(me.device)
    model = call_student(student, "shard", model, mesh_of(me), reduce_dtype) or model
    units = [
        (n, m) for n, m in model.named_modules() if m is model or isinstance(m, Block)
    ]
    bare = [n or "the root" for n, m in units if not isinstance(m, FSDPModule)]
    if bare:
        raise NotUnits(
            f"shard() left {', '.join(bare)} without fully_shard: fully_shard each "
            "block, then the root (the model itself), and return the model"
        )
    call_student(student, "prefetch", model)
    return model, torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)


def our_model(me: zb.Rank):
    torch.manual_seed(0)
    model = GPT(CONFIG).to(torch.bfloat16).to(me.device)
    return model, Zero3AdamW(model, unit_types=(Block,), lr=LR, weight_decay=0.01)


def step(model, optimizer, index: int, me: zb.Rank) -> float:
    return train_step(model, optimizer, rank_batch(CONFIG, BATCH, index, me))


def parity(student, me: zb.Rank) -> dict:
    """The losses and final weights of ours and the student's; the dtype (or dtypes) the
    student's blocks computed in (their outputs'), which names a param_dtype not bf16."""
    with ordered_sums():
        runs = {"ours": our_model(me), "student": student_model(student, me)}
        computed = set()

        def note(module, args, out) -> None:  # the dtype the block computed in
            computed.add(str(out.dtype).removeprefix("torch."))

        hook = runs["student"][0].blocks[0].register_forward_hook(note)
        losses = {
            name: [step(*built, i, me) for i in range(STEPS)]
            for name, built in runs.items()
        }
        hook.remove()
    final = {name: full_weights(*built, torch.bfloat16) for name, built in runs.items()}
    return {
        "computed_in": sorted(computed),
        "losses": losses,
        "diff": (final["student"] - final["ours"]).abs().max().item(),
        "weight_scale": final["ours"].abs().max().item(),
    }


def memory(student, me: zb.Rank) -> dict:
    model, optimizer = student_model(student, me)
    tokens = random_batch(CONFIG, BATCH, seed=me.rank).to(me.device)
    next_token_loss(model, tokens).backward()
    optimizer.step()
    return {
        "kept": kept_bytes(model, optimizer),
        "num_params": sum(p.numel() for p in GPT(CONFIG).parameters()),
        "units": [
            n or "root" for n, m in model.named_modules() if isinstance(m, FSDPModule)
        ],
        "blocks": [name for name, m in model.named_modules() if isinstance(m, Block)],
    }


def traffic(student, me: zb.Rank) -> dict:
    """Bytes per collective of one step: ours, and the student's with each reduce_dtype
    (`student_bf16`, `student_fp32`)."""
    sent = {}
    builds = {"ours": partial(our_model, me)} | {
        f"student_{name}": partial(student_model, student, me, dtype)
        for name, dtype in REDUCE_DTYPES.items()
    }
    for name, build in builds.items():
        built = build()
        step(*built, 0, me)  # FSDP2 initialises lazily in its first forward
        with CommMeter() as meter:
            step(*built, 1, me)
        sent[name] = {op: e["bytes"] for op, e in meter.summary().items()}
    return sent


def precision(student, me: zb.Rank) -> dict:
    """One backward of the same batch with the gradients reduce-scattered in bf16, in fp32 and in
    float64 (the reference): the largest difference of each reduced gradient shard from the
    float64 one, relative to the largest element, and the bytes of the reduce-scatters."""
    shards, sent = {}, {}
    for name, dtype in {**REDUCE_DTYPES, "fp64": torch.float64}.items():
        model, _ = student_model(student, me, dtype)
        with CommMeter() as meter:
            next_token_loss(model, rank_batch(CONFIG, BATCH, 0, me)).backward()
        shards[name] = torch.cat(
            [local(p.grad).double().reshape(-1) for p in model.parameters()]
        )
        sent[name] = meter.summary().get("reduce_scatter_tensor", {}).get("bytes", 0)
    reference = shards.pop("fp64")
    scale = reference.abs().max().item()
    return {
        "error": {
            name: (g - reference).abs().max().item() / scale
            for name, g in shards.items()
        },
        "reduce_scatter_bytes": sent,
        "world_size": me.world_size,
    }


def prefetch(student, me: zb.Rank) -> dict:
    """All-gathers issued before each block's forward began (a hook registered after FSDP2's)."""
    model, optimizer = student_model(student, me)
    step(model, optimizer, 0, me)
    blocks = [(name, m) for name, m in model.named_modules() if isinstance(m, Block)]
    issued = {}

    def count(
        name: str,
    ) -> None:  # a pre-hook returns None (else it replaces the input)
        issued.setdefault(
            name, sum(e.op.startswith("all_gather") for e in meter.events)
        )

    with CommMeter() as meter:
        hooks = [
            m.register_forward_pre_hook(lambda mod, args, name=name: count(name))
            for name, m in blocks
        ]
        step(model, optimizer, 1, me)
    for hook in hooks:
        hook.remove()
    return {"issued": issued, "blocks": [name for name, _ in blocks]}


def checkpoint(student, me: zb.Rank) -> dict:
    """Save after two steps; load into a fresh model with the student's file imported again,
    then continue. A fresh process reads what the save wrote (zerobook.labs.checkpoint_readback):
    which weights and moments the disk lacks, and which the student's load of a copy with other
    values (`shifted`, which no process held in memory) did not restore."""
    model, optimizer = student_model(student, me)
    for i in range(2):
        step(model, optimizer, i, me)
    optimizer.param_groups[0]["lr"] = LR / 2  # as a schedule would have it by now
    folder = tempfile.mkdtemp(prefix="lab6-") if me.rank == 0 else None
    folder = Path(broadcast_text(folder, me))
    # before the save: a save that rewrites the model (to values a shift rounds back to, our
    # red team's) is compared with what training left
    before, held = state_digests(model, optimizer), tensor_digests(model, optimizer)
    call_student(student, "save", model, optimizer, str(folder / "ckpt"))
    torch.distributed.barrier()  # every rank's shards are written
    reading = me.rank == 0 and readback.start(folder / "ckpt", folder / "shifted")
    try:
        continued = step(model, optimizer, 2, me)
        again = import_again(student.__file__)  # nothing of the first import's memory,
        fresh, fresh_optimizer = student_model(again, me)  # nor on the model it shards
        step(fresh, fresh_optimizer, 5, me)  # another state, which the load overwrites
        failed = None
        try:  # a load that raises may be the save's fault: what the disk lacks decides
            call_student(again, "load", fresh, fresh_optimizer, str(folder / "ckpt"))
        except (Exception, CheckpointException) as exc:  # noqa: BLE001 - raised below
            failed = exc
        report = {
            "saved": before,
            "loaded": state_digests(fresh, fresh_optimizer),
            "lr": {"saved": LR / 2, "loaded": fresh_optimizer.param_groups[0]["lr"]},
            "continued": continued,
            "resumed": float("nan") if failed else step(fresh, fresh_optimizer, 2, me),
        }
    finally:  # whatever the student's load did, rank 0's peers are told what was read
        readback.finish(reading, folder)
    disk = readback.result(folder, me)
    report.update(read_back(student.__file__, folder, held, disk, me))
    torch.distributed.barrier()  # every rank has read both: the checkpoints go
    if me.rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
    if failed is not None and not report["not_on_disk"]:
        raise failed  # the disk holds everything: the load's own mistake, named at its line
    return (
        report  # a save that left tensors out is named as such, not the load it broke
    )


def read_back(path: str, folder: Path, held: dict, disk: dict, me: zb.Rank) -> dict:
    """`not_on_disk`: the weights and moments (by name) whose values at the save the fresh
    process did not find; `not_read`: those that a third import's load of the shifted copy,
    into a model of its own, left without their values."""
    if "error" in disk:
        return {"read_back": disk["error"], "not_on_disk": list(held), "not_read": []}
    keys = {  # every key holding the name's values (a file may save a tensor twice)
        name: [k for k, found in disk["found"].items() if found == digest]
        for name, digest in held.items()
    }
    lacking = [name for name, found in keys.items() if not found]
    third = import_again(path, "student_third")
    model, optimizer = student_model(third, me)
    step(model, optimizer, 5, me)
    try:
        call_student(third, "load", model, optimizer, str(folder / "shifted"))
    except (Exception, CheckpointException):  # noqa: BLE001 - raised unless the save's fault
        if not lacking:
            raise
        return {"not_on_disk": lacking, "not_read": []}  # a partial save's load fails
    now = tensor_digests(model, optimizer)
    return {
        "not_on_disk": lacking,
        "not_read": [
            name
            for name, found in keys.items()
            if found and now.get(name) not in {disk["shifted"][k] for k in found}
        ],
    }


def broadcast_text(text, me: zb.Rank) -> str:
    """Rank 0's string on every rank (the checkpoint folder must be one path for all)."""
    return plain_objects.broadcast(text, src=0)  # JSON: a peer's pickle could run code


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    student = load_student(cli.student)
    parts = dict(zip(PARTS, (parity, memory, traffic, precision, prefetch, checkpoint)))
    if len(cli.parts) == 1:
        zb.report(**parts[cli.part](student, me))
        return
    reports = {}
    for name in cli.parts:  # one launch, each part graded on its own
        try:
            reports[name] = parts[name](student, me)
        except (Exception, CheckpointException) as exc:  # noqa: BLE001 - its test shows it
            failed = crash.failure(exc, f"part {name}", me.rank, cli.student)
            failed["hint"] = hints.common(exc, me.world_size, failed["where"])
            reports[name] = {"raised": crash.said(failed)}
    zb.report(parts=reports)


if __name__ == "__main__":
    main()
