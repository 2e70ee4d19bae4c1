"""Capstone harness: the student's own DDP and ZeRO-3 train the course's GPT on real text
(the standard library's source, zerobook.train.text) beside PyTorch's FSDP2.

    python -m torch.distributed.run --standalone --nproc-per-node 3 \
        -m zerobook.labs.capstone --student capstone_student.py --part train

The student's file holds what they built in Labs 2 and 5, and three functions more:
    BucketedDDP(model, bucket_cap_bytes), .finish()          their DDP (Lab 2)
    Zero3(model, units, optimizer_class, **options),
        .step(), .zero_grad()                                their ZeRO-3 (Lab 5)
    clip_sharded(zero3, max_norm) -> float                   clipping by the global norm
    save_shard(zero3, path), load_shard(zero3, path)         this rank's checkpoint shard
Part `train`: from one seed, PyTorch's FSDP2 (its own clip_grad_norm_) and the student's
DDP (clipped in piece order, zerobook.train.capstone_train) train PREFIX steps; the student's
ZeRO-3 trains STEPS, all on one schedule (the first PREFIX steps of every run the same
batches and learning rates), every sum in rank order (zerobook.train.parity). Reported per
method: each rank's loss and clipped norm per step, held-out bits per byte, the bytes of
model state the rank keeps after a step, tokens per second; the baselines; a sample.
Part `resume` (launched with --max-restarts 1): the student's ZeRO-3 with a checkpoint
every EVERY steps (zerobook.labs.capstone_resume), rank 1 killed with SIGKILL while the
checkpoint of step KILL_AT is written; torchrun starts every rank again, they load the
last committed checkpoint and train to PREFIX.
"""

import functools
import types

import torch

import zerobook as zb
from zerobook.labs import capstone_resume, hints
from zerobook.labs.crash import Steps, describe
from zerobook.labs.freed import FreedCalls, guard_units
from zerobook.labs.harness import call_student, lab_params, load_student
from zerobook.labs.harness import parse_args, refuse
from zerobook.labs.means import verdicts
from zerobook.labs.student_state import tensors
from zerobook.labs.weights_used import weights_used
from zerobook.labs.zero3_record import RecordedAdamW
from zerobook.labs.zero3_record import torch_fsdp_used
from zerobook.train import measure, text
from zerobook.train.capstone_train import CONFIG, OPTIONS, clip_in_piece_order
from zerobook.train.capstone_train import held_out_bits, optimizer_groups, sample, train
from zerobook.train.measure import unique_bytes
from zerobook.train.models import GPT
from zerobook.train.parity import norm_bound, ordered_sums

PARTS = ("train", "resume")
# zerobook.labs.freed.FreedCalls, once the student's ZeRO-3 is built
GUARD: list = [None]
# an instructor's own (zerobook.labs.harness.lab_params); and shorter runs for tests
HIDDEN = lab_params(seed=0, steps=600, prefix=100, every=25, kill_at=50)
SEED, STEPS, PREFIX = HIDDEN["seed"], HIDDEN["steps"], HIDDEN["prefix"]
EVERY, KILL_AT, BUCKET_CAP_BYTES = HIDDEN["every"], HIDDEN["kill_at"], 64 * 1024
if not 0 < EVERY < KILL_AT < PREFIX <= STEPS or KILL_AT % EVERY:
    raise ValueError(f"capstone: 0 < every < kill_at < prefix <= steps, kill_at a "
                     f"multiple of every: {dict(HIDDEN)}")  # fmt: skip


def model_from(me) -> torch.nn.Module:
    torch.manual_seed(SEED)
    return GPT(CONFIG).to(me.device)


def model_buffers(model) -> set:
    """The model's buffers before the student's code runs (one it registers is its own)."""
    return {measure.storage_key(b) for b in model.buffers()}


class StudentDDP:
    """The student's BucketedDDP; AdamW in two groups; clipping in piece order. After each
    finish(), every param.grad must hold the mean of every rank's gradient (the harness's
    hooks, registered first, copy each as it arrives: zerobook.labs.means)."""

    def __init__(self, student, model, me):
        self.model, self.world_size, self.me = model, me.world_size, me
        self.student, self.grads, self.steps = student, {}, 0
        self.own_buffers = model_buffers(model)
        names = {id(p): name for name, p in model.named_parameters()}
        for param in model.parameters():
            param.register_post_accumulate_grad_hook(
                lambda p: self.grads.update({names[id(p)]: p.grad.detach().clone()})
            )
        self.ddp = call_student(student, "BucketedDDP", model, BUCKET_CAP_BYTES)
        groups = optimizer_groups(list(model.parameters()))
        self.optimizer = torch.optim.AdamW(groups, **OPTIONS)

    def backward(self, loss):
        loss.backward()
        call_student(self.ddp, "finish")
        holds, _ = verdicts(self.model, self.grads, self.me)
        wrong = [
            (name, held)
            for name, held in holds.items()
            if held not in ("mean", "divided_mean")
        ]
        if wrong:
            raise RuntimeError(
                f"step {self.steps}: after your DDP's finish(), {wrong[0][0]}'s gradient "
                f"holds {wrong[0][1]!r}, not the mean of every rank's ({len(wrong)} "
                "gradient(s) so): finish() must leave each param.grad that mean"
            )
        self.steps += 1

    def clip(self, max_norm: float) -> float:
        return clip_in_piece_order(self.model, max_norm, self.world_size)

    def step(self):
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad(set_to_none=True)

    def kept(self) -> int:
        held = [self.ddp, self.model, self.optimizer]
        held = tensors(held, self.student, self.model, grads=True)
        return unique_bytes(held, set(self.own_buffers))


class StudentZero3:
    """The student's Zero3 (units: the blocks) over an AdamW the harness can see; the
    student's clip_sharded."""

    def __init__(self, student, model, me):
        self.model, self.student = model, student
        self.own_buffers = model_buffers(model)
        make = types.SimpleNamespace(Zero3=functools.partial(student.Zero3, **OPTIONS))
        before = len(RecordedAdamW.made)
        self.zero = call_student(
            make, "Zero3", model, list(model.blocks), RecordedAdamW
        )
        made = RecordedAdamW.made[before:]
        if len(made) != 1:
            raise RuntimeError(
                f"your Zero3 made {len(made)} optimizers with optimizer_class: one, "
                "over the master pieces in two groups"
            )
        self.optimizer = made[0]
        owned = {id(p) for block in model.blocks for p in block.parameters()}
        units = {"root": (model, [p for p in model.parameters() if id(p) not in owned])}
        units |= {
            f"blocks.{k}": (b, list(b.parameters())) for k, b in enumerate(model.blocks)
        }
        names = {id(p): name for name, p in model.named_parameters()}
        guard_units(units, names)  # weights freed too early: named, not a crash
        if GUARD[0] is None:  # its gathers' copies checked too, from now on only
            GUARD[0] = FreedCalls()
            GUARD[0].__enter__()  # the grader's own mode, for the rest of the run
        GUARD[0].names.learn({p: names[id(p)] for p in model.parameters()})
        GUARD[0].on = True

    def backward(self, loss):
        loss.backward()

    def clip(self, max_norm: float) -> float:
        norm = call_student(self.student, "clip_sharded", self.zero, max_norm)
        if not isinstance(norm, (float, int)):
            raise TypeError(f"clip_sharded returned {type(norm).__name__}: a float")
        return float(norm)

    def step(self):
        call_student(self.zero, "step")

    def zero_grad(self):
        call_student(self.zero, "zero_grad")

    def kept(self) -> int:
        held = [self.zero, self.model, self.optimizer]
        held = tensors(held, self.student, self.model, grads=True)
        return unique_bytes(held, set(self.own_buffers))


class FSDP2:
    """PyTorch's FSDP2: fully_shard every block, then the root; its clip_grad_norm_."""

    def __init__(self, model, me):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(me.device.split(":")[0], (me.world_size,))
        for module in [*model.blocks, model]:
            fully_shard(module, mesh=mesh)
        self.model = model
        groups = optimizer_groups(list(model.parameters()))
        self.optimizer = torch.optim.AdamW(groups, **OPTIONS)

    def backward(self, loss):
        loss.backward()

    def clip(self, max_norm: float) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    def step(self):
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad(set_to_none=True)

    def kept(self) -> int:
        params = list(self.model.parameters())
        state = [t for s in self.optimizer.state.values() for t in s.values()]
        tensors = params + [p.grad for p in params if p.grad is not None] + state
        return unique_bytes([getattr(t, "_local_tensor", t) for t in tensors])


def run(method, name: str, steps: int, data, held_out, me) -> dict:
    """`steps` steps of the STEPS-step schedule; the bytes kept after the first step;
    held-out bits per byte at the end, of the weights the model computes with, in a model of
    the harness's (no hook of the student's: zerobook.labs.weights_used), the same on
    every rank."""
    kept = []
    result = train(method, data, me, range(steps), STEPS, name, kept=kept)
    result["kept"] = kept[0]
    theirs = not isinstance(
        method, FSDP2
    )  # PyTorch's, the harness's own: measured as it is
    method.used = weights_used(method.model, me, name) if theirs else method.model
    result["held_out"] = held_out_bits(method.used, held_out, me)
    return result


def train_part(student, me, data, held_out, student_file: str) -> dict:
    """FSDP2's run, the student's DDP's, the student's ZeRO-3's. A DDP that fails on
    every rank of its own error (zerobook.labs.crash) is reported failed and ZeRO-3 runs
    all the same (its tests, the resume test among them, still count)."""
    runs = {
        "fsdp2": run(FSDP2(model_from(me), me), "FSDP2", PREFIX, data, held_out, me)
    }
    steps = Steps(me.rank, student_file, hints.zero(me.world_size))
    with steps.at("your DDP's run"):
        ddp = StudentDDP(student, model_from(me), me)
        runs["ddp"] = run(ddp, "your DDP", PREFIX, data, held_out, me)
    if not steps.agree("your DDP's run"):
        if not steps.alike:  # a rank lost its peer: the collectives may be out of step
            raise RuntimeError(describe(steps.failed))
        runs["ddp"] = {"failed": steps.failed}
    zero3 = StudentZero3(student, model_from(me), me)
    runs["zero3"] = run(zero3, "your ZeRO-3", STEPS, data, held_out, me)
    generated = sample(zero3.used, b"def ", 200, me.device)
    used = torch_fsdp_used(zero3.model) + (
        torch_fsdp_used(ddp.model) if steps.going else []
    )
    numel = sum(p.numel() for p in zero3.model.parameters())
    # two orders of one norm's sum: at most this far apart, relatively (zerobook.train.parity)
    return {"runs": runs, "sample": generated, "fsdp_used": used, "failed": steps.failed,
            "norm_bound": norm_bound(numel)}  # fmt: skip


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    data, held_out = text.load()
    with ordered_sums():
        student = load_student(cli.student)
        if cli.part == "train":
            result = train_part(student, me, data, held_out, cli.student)
        else:
            make = functools.partial(StudentZero3, student, model_from(me), me)
            result = capstone_resume.resume(
                make, student, data, me, STEPS, PREFIX, EVERY, KILL_AT
            )
    more = [f"your model uses {n}" for n in result.pop("fsdp_used", [])]
    refuse("your DDP and ZeRO-3", more=more)
    if cli.part == "train" and me.is_main:
        result["baselines"] = {
            n: text.ngram_bits_per_byte(data, held_out, n) for n in (1, 2)
        }
    params = list(model_from(me).parameters())
    zb.report(
        **result,
        world_size=me.world_size,
        params=[p.numel() for p in params],
        prefix=PREFIX,
        steps=STEPS,
        seed=SEED,
        train_bytes=len(data),
        held_out_bytes=len(held_out),
    )


if __name__ == "__main__":
    main()
