"""Lab 0 harness: run one part of the student's rank script on every rank and report it.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.labs.setup_check --student setup_check_student.py --part all_reduce

Parts: `all_reduce` reports each rank's total; `gather` reports the list of what each rank saw
and what this rank really is, so the notebook's tests can compare the two.

Each function is called a second time with what only this rank knows, so that a test the idea
passes is one no rank passes alone: `all_reduce_contributions` with a secret number in place of
the rank (every rank's total must be the sum of all the secrets, which the harness all-reduces
itself), `gather_what_each_rank_sees` with `socket.gethostname` answering a secret name (every
rank's list must hold every rank's). A rank that computes the answer without the collective
gets its own secret right and the others' wrong.
"""

import secrets
import socket
from contextlib import contextmanager

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.labs.harness import call_student, load_student, parse_args
from zerobook.trust import plain_objects

PARTS = ("all_reduce", "gather")


@contextmanager
def hostname(name: str):
    """socket.gethostname answering `name` (what the student's file reaches is this module's
    function, through its view: zerobook.trust.restricted)."""
    real = socket.gethostname
    socket.gethostname = lambda: name
    try:
        yield
    finally:
        socket.gethostname = real


def main() -> None:
    cli = parse_args(PARTS)
    me = zb.setup()
    student = load_student(cli.student)
    # small enough that float32 adds any ranks' secrets exactly (below 2**24 in all)
    secret = 1_000 + secrets.randbelow(2**18)
    if cli.part == "all_reduce":
        total = call_student(student, "all_reduce_contributions", me.rank, me.device)
        hidden = call_student(student, "all_reduce_contributions", secret, me.device)
        truth = torch.tensor([secret + 1.0], dtype=torch.float64)
        dist.all_reduce(truth)
        zb.report(total=total, secret_total=hidden, secret_truth=truth.item())
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
        name = f"host-{secret}"
        with hostname(name):
            hidden = call_student(
                student, "gather_what_each_rank_sees", me.backend, me.device
            )
        hosts = [s.get("host") if isinstance(s, dict) else s for s in hidden or []]
        zb.report(
            seen=seen,
            truth=truth,
            secret_hosts=hosts,
            secret_truth=plain_objects.all_gather(name),  # the harness's own: no pickle
        )


if __name__ == "__main__":
    main()
