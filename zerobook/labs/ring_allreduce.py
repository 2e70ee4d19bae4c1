"""Lab 3 harness: the student's ring all-reduce against dist.all_reduce, and its bytes counted.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.labs.ring_allreduce --student ring_student.py --part correct

Parts: `correct` runs the student's `ring_all_reduce(tensor)` on sizes that N may not divide, in
fp32 and fp64 (small integers, so any order of addition gives the exact sum), and reports which
cases equal dist.all_reduce, and for a wrong one which chunk is wrong after which phase
(zerobook.labs.ring_chunks); `bytes` meters one all-reduce whose size N divides, and reports the
bytes the rank sent point to point, whatever the sum. Sends and receives are held until waited
on (zerobook.labs.ring_held): a ring that never waits fails `correct`, naming its line. Either
part fails if the student's ring called a built-in collective, or ran an operation dist's
functions did not record (a function taken before the meter wrapped it: the process group's own
count of its operations says so).
"""

from contextlib import contextmanager

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.data_parallel.inflight import every_group_count
from zerobook.labs import hints
from zerobook.labs.harness import call_student, load_student, loaded, parse_args, refuse
from zerobook.labs.ring_chunks import case_inputs, verdict
from zerobook.labs.ring_held import HeldP2P
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
                        f"{hints.ring(size, world_size, text)}: {text}",)  # fmt: skip
        raise


def ring_call(student, tensor, me: zb.Rank, step: int, on_receive=None):
    """The student's ring_all_reduce(tensor), metered, its sends and receives held until
    waited on; returns the meter, the held calls, and what it never waited on. It fails the
    part if it called a built-in collective, or ran an operation the meter did not see (a
    collective or a send taken before the meter was in place: the process group's own count
    says so)."""
    before = every_group_count()
    held = HeldP2P(loaded[0], on_receive)
    with CommMeter() as meter, held, named_case(tensor, me.world_size):
        call_student(student, "ring_all_reduce", tensor)
    unwaited = held.drain()
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
    return meter, held, unwaited


def never_waited(unwaited: list) -> RuntimeError:
    """The error for sends and receives the student's ring never waited on, naming the first."""
    kinds = sorted({kind for kind, _ in unwaited})
    return RuntimeError(
        f"your ring_all_reduce returned without waiting on {len(unwaited)} of its "
        f"{' and '.join(f'{k}s' for k in kinds)} (the first made at {unwaited[0][1]}): a "
        "received chunk is in place only once wait() returns; call wait() on every work "
        "that batch_isend_irecv (or isend/irecv) returns, before you add or pass on the chunk"
    )


def check_case(student, size: int, dtype: torch.dtype, me: zb.Rank, step: int):
    """One tensor on this rank's device, summed in place by the student and by
    dist.all_reduce: (equal?, what is wrong in words, or "")."""
    inputs = case_inputs(size, dtype, me.world_size)
    theirs = inputs[me.rank].to(me.device, copy=True)
    expected = theirs.clone()
    dist.all_reduce(expected)
    snapshot = []

    def on_receive(index: int) -> None:  # the N-th receive starts the all-gather
        if index == me.world_size - 1:
            snapshot.append(theirs.detach().clone())

    _, held, unwaited = ring_call(student, theirs, me, step, on_receive)
    if unwaited:
        raise never_waited(unwaited)
    if torch.equal(theirs, expected):
        return True, ""
    name = f"on {size} {str(dtype).split('.')[-1]} element{'s' * (size != 1)}"
    found = verdict(theirs, (snapshot or [None])[0], inputs, me.rank, held.received)
    return False, f"{name}: {found}"


def first_said(said: dict, sizes: dict) -> str:
    """The wrong case to describe: the first of at least 1000 elements (its chunks are too
    long to hold a sum by chance), else the first; with how many others are wrong."""
    wrong = [case for case, words in said.items() if words]
    if not wrong:
        return ""
    chosen = next((case for case in wrong if sizes[case] >= 1000), wrong[0])
    others = len(wrong) - 1
    return said[chosen] + (f" (and {others} other case(s) wrong)" if others else "")


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    step = per_p2p_op(me)
    student = load_student(cli.student)
    if cli.part == "correct":
        said, cases, sizes = {}, {}, {}
        for dtype in (torch.float32, torch.float64):
            for size in SIZES:
                case = f"{str(dtype).split('.')[-1]}/{size}"
                cases[case], said[case] = check_case(student, size, dtype, me, step)
                sizes[case] = size
        refuse("your ring")
        zb.report(cases=cases, wrong=first_said(said, sizes))
        return
    tensor = torch.ones(me.world_size * 12_000, device=me.device)
    meter, _, _ = ring_call(student, tensor, me, step)  # bytes, waited on or not
    refuse("your ring")
    zb.report(
        sent=meter.bytes_sent(),
        size_bytes=tensor.numel() * tensor.element_size(),
        collectives=[],  # ring_call refuses any
        correct=bool((tensor == me.world_size).all()),
    )


if __name__ == "__main__":
    main()
