"""Lab 0 harness: run one part of the student's rank script on every rank and report it.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.labs.setup_check --student setup_check_student.py --part all_reduce

Parts: `all_reduce` reports each rank's total; `gather` reports the list of what each rank saw
and what this rank really is, so the notebook's tests can compare the two.
"""

import socket

import zerobook as zb
from zerobook.labs.harness import call_student, load_student, parse_args

PARTS = ["all_reduce", "gather"]


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    student = load_student(cli.student)
    if cli.part == "all_reduce":
        total = call_student(student, "all_reduce_contributions", me.rank, me.device)
        zb.report(total=total)
    else:
        seen = call_student(
            student, "gather_what_each_rank_sees", me.backend, me.device
        )
        truth = {
            "rank": me.rank,
            "backend": me.backend,
            "device": me.device,
            "host": socket.gethostname(),
        }
        zb.report(seen=seen, truth=truth)


if __name__ == "__main__":
    main()
