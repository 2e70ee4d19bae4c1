"""Lab 3 harness: the student's ring all-reduce against dist.all_reduce, and its bytes counted.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.labs.ring_allreduce --student ring_student.py --part correct

Parts: `correct` runs the student's `ring_all_reduce(tensor)` on sizes that N may not divide, in
fp32 and fp64 (small integers, so any order of addition gives the exact sum), and reports which
cases equal dist.all_reduce; `bytes` meters one all-reduce whose size N divides, and reports the
bytes the rank sent point to point and any built-in collective it called.
"""

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.comm import CommMeter
from zerobook.labs.harness import call_student, forbid, load_student, parse_args, refuse

PARTS = ["correct", "bytes"]
FORBIDDEN = ("zerobook.collectives",)  # the course's ring: what this lab grades
UNSEEN = ("zerobook.collectives",)  # hidden from a graded submission
SIZES = [1, 7, 1001, 4096 + 3, 2**20]


def check_case(student, size: int, dtype: torch.dtype, me: zb.Rank) -> bool:
    """One tensor on this rank's device, summed in place by the student and by dist.all_reduce: equal?"""
    torch.manual_seed(size * 31 + me.rank)
    theirs = torch.randint(-100, 100, (size,)).to(device=me.device, dtype=dtype)
    expected = theirs.clone()
    dist.all_reduce(expected)
    call_student(student, "ring_all_reduce", theirs)
    return torch.equal(theirs, expected)


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    files = forbid(FORBIDDEN)
    student = load_student(cli.student)
    if cli.part == "correct":
        cases = {
            f"{str(dtype).split('.')[-1]}/{size}": check_case(student, size, dtype, me)
            for dtype in (torch.float32, torch.float64)
            for size in SIZES
        }
        refuse("your ring", student=student, files=files)
        zb.report(cases=cases)
        return
    tensor = torch.ones(me.world_size * 12_000, device=me.device)
    with CommMeter() as meter:
        call_student(student, "ring_all_reduce", tensor)
    refuse("your ring", student=student, files=files)
    collectives = sorted(
        op for op in meter.summary() if op not in ("send", "isend", "recv", "irecv")
    )
    zb.report(
        sent=meter.bytes_sent(),
        size_bytes=tensor.numel() * tensor.element_size(),
        collectives=collectives,
        correct=bool((tensor == me.world_size).all()),
    )


if __name__ == "__main__":
    main()
