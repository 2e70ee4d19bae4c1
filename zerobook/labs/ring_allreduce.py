"""Lab 3 harness: the student's ring all-reduce against dist.all_reduce, and its bytes counted.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.labs.ring_allreduce --student ring_student.py --part correct

Parts: `correct` runs the student's `ring_all_reduce(tensor)` on sizes that N may not divide, in
fp32 and fp64 (small integers, so any order of addition gives the exact sum), and reports which
cases equal dist.all_reduce; `bytes` meters one all-reduce whose size N divides, and reports the
bytes the rank sent point to point. Either part fails if the student's ring called a built-in
collective, or ran an operation dist's functions did not record (a function taken before the
meter wrapped it: the process group's own count of its operations says so).
"""

from contextlib import contextmanager

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.data_parallel.inflight import every_group_count
from zerobook.labs import hints
from zerobook.labs.harness import call_student, load_student, parse_args, refuse
from zerobook.trust.restricted import PolicyViolation
from zerobook.trust.report_guard import TamperError

PARTS = ("correct", "bytes")
SIZES = (1, 7, 1001, 4096 + 3, 2**20)


P2P = ("send", "isend", "recv", "irecv")
UNNAMED = (PolicyViolation, TamperError)  # the course's own refusals, as they are


def per_p2p_op(me: zb.Rank) -> int:
    """How far one send or receive moves the process group's count of its operations (gloo: 1;
    a backend may count only collectives: 0), from one metered exchange with a neighbour."""
    before = every_group_count()
    out, into = torch.zeros(1, device=me.device), torch.zeros(1, device=me.device)
    ops = [dist.P2POp(dist.isend, out, (me.rank + 1) % me.world_size),
           dist.P2POp(dist.irecv, into, (me.rank - 1) % me.world_size)]  # fmt: skip
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    return (every_group_count() - before) // 2


@contextmanager
def named_case(tensor, world_size: int):
    """An error of the student's ring, its message led by the case it failed on ("on a
    tensor of 7 float32 elements, N = 3 (3 does not divide 7): ..."); same type and
    traceback, so the launch's summary still leads with the student's line."""
    try:
        yield
    except Exception as exc:
        text = exc.args[0] if len(exc.args) == 1 else None
        if isinstance(text, str) and str(exc) == text and not isinstance(exc, UNNAMED):
            size, dtype = tensor.numel(), str(tensor.dtype).split(".")[-1]
            exc.args = (f"on a tensor of {size} {dtype} element{'s' * (size != 1)}, N = {world_size}"
                        f"{hints.ring(size, world_size)}: {text}",)  # fmt: skip
        raise


def ring_call(student, tensor, me: zb.Rank, step: int) -> CommMeter:
    """The student's ring_all_reduce(tensor), metered; it fails the part if it called a
    built-in collective, or ran an operation the meter did not see (a collective or a send
    taken before the meter was in place: the process group's own count says so)."""
    before = every_group_count()
    with CommMeter() as meter, named_case(tensor, me.world_size):
        call_student(student, "ring_all_reduce", tensor)
    p2p = sum(event.op in P2P for event in meter.events)
    builtin = sorted({event.op for event in meter.events if event.op not in P2P})
    unseen = every_group_count() - before - step * p2p - len(builtin)
    if builtin:
        raise RuntimeError(
            f"your ring_all_reduce called {', '.join(builtin)}, a built-in collective: "
            "build the ring from send and receive alone"
        )
    if unseen > 0 and before >= 0:
        raise RuntimeError(
            f"your ring_all_reduce ran {unseen} operation(s) that dist's functions did not "
            "record (a collective or a send taken some other way): use dist.send/recv, "
            "isend/irecv or batch_isend_irecv"
        )
    return meter


def check_case(student, size: int, dtype: torch.dtype, me: zb.Rank, step: int) -> bool:
    """One tensor on this rank's device, summed in place by the student and by dist.all_reduce: equal?"""
    torch.manual_seed(size * 31 + me.rank)
    theirs = torch.randint(-100, 100, (size,)).to(device=me.device, dtype=dtype)
    expected = theirs.clone()
    dist.all_reduce(expected)
    ring_call(student, theirs, me, step)
    return torch.equal(theirs, expected)


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    step = per_p2p_op(me)
    student = load_student(cli.student)
    if cli.part == "correct":
        cases = {
            f"{str(dtype).split('.')[-1]}/{size}": check_case(
                student, size, dtype, me, step
            )
            for dtype in (torch.float32, torch.float64)
            for size in SIZES
        }
        refuse("your ring")
        zb.report(cases=cases)
        return
    tensor = torch.ones(me.world_size * 12_000, device=me.device)
    meter = ring_call(student, tensor, me, step)
    refuse("your ring")
    zb.report(
        sent=meter.bytes_sent(),
        size_bytes=tensor.numel() * tensor.element_size(),
        collectives=[],  # ring_call refuses any
        correct=bool((tensor == me.world_size).all()),
    )


if __name__ == "__main__":
    main()
