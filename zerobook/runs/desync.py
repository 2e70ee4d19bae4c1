"""A rank that leaves the collective order partway through a run (the chapter "When a run goes
wrong"):

    python -m torch.distributed.run --nproc-per-node 3 -m zerobook.runs.desync --dump DIR

Every rank all-reduces each parameter's gradient, in the same order, step after step. At step
`--at`, rank 0 alone saves a checkpoint, and the saving calls a collective (a broadcast of the
first layer's weights, where a sharded model's save would gather them), while its peers go on to
all-reduce their next gradient. Collectives meet by order, so the broadcast and the
all-reduce wait for each other until the collective's timeout; TORCH_DISTRIBUTED_DEBUG=DETAIL
names both instead. With `--dump DIR`, each rank writes PyTorch's flight recorder (set
TORCH_FR_BUFFER_SIZE; a pickle that `python -m torch.distributed.flight_recorder.fr_trace DIR`
reads) to DIR/fr_rank<r> when its collective fails, or when the launcher stops it (SIGTERM,
once a peer has failed) while it still waits.
"""

import argparse
import os
import signal
from pathlib import Path

import torch
import torch.distributed as dist

import zerobook as zb

WIDTH, PER_RANK, STEPS = 64, 8, 4


def keep_flight_record(folder: str, rank: int) -> None:
    """Write this rank's flight recorder (torch's dump: its `entries`, oldest first, each
    collective's name, sequence number and sizes; its `pg_config`) to folder/fr_rank<rank>."""
    import torch._C._distributed_c10d as c10d

    (Path(folder) / f"fr_rank{rank}").write_bytes(c10d._dump_fr_trace(True, True))


def keep_flight_record_when_stopped(folder: str, rank: int) -> None:
    """On SIGTERM, write this rank's flight recorder, then end by SIGTERM as before (a rank
    blocked in a collective runs the handler once its own timeout returns)."""

    def keep_and_stop(number, _frame):
        keep_flight_record(folder, rank)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)

    signal.signal(signal.SIGTERM, keep_and_stop)


def train(at: int, rank: int) -> None:
    """SGD on a small MLP, one all-reduce a parameter a step; rank 0 saves at step `at`."""
    torch.manual_seed(0)  # the same weights on every rank
    net = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, 1)
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for step in range(STEPS):
        x = torch.randn(PER_RANK, WIDTH, generator=torch.Generator().manual_seed(step))
        loss = net(x).square().mean()
        opt.zero_grad()
        loss.backward()
        if step == at and rank == 0:  # the bug: a collective inside a rank-0-only save
            dist.broadcast(net[0].weight.detach(), src=0)
        for p in net.parameters():
            dist.all_reduce(p.grad)
        opt.step()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--at", type=int, default=2, help="the step rank 0 saves at")
    parser.add_argument("--dump", help="a folder for each rank's flight recorder")
    cli = parser.parse_args()
    me = zb.setup(verbose=False)
    if cli.dump:
        keep_flight_record_when_stopped(cli.dump, me.rank)
    try:
        train(cli.at, me.rank)
    except RuntimeError:
        if cli.dump:
            keep_flight_record(cli.dump, me.rank)
        raise
    zb.report(rank=me.rank, steps=STEPS)


if __name__ == "__main__":
    main()
