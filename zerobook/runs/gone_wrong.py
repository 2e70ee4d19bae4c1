"""Ways a data-parallel run goes wrong, each made on purpose (the chapter "When a run goes wrong"):

    python -m torch.distributed.run --nproc-per-node 3 -m zerobook.runs.gone_wrong --fault nan

    order       rank 0 broadcasts where its peers all-reduce: the ranks wait on each other until
                the collective's timeout (checked with TORCH_DISTRIBUTED_DEBUG=DETAIL: named at once)
    nan         rank 1's batch holds an infinity: its gradients turn NaN, and the all-reduce gives
                NaN to every rank; a check of each rank's own gradients before the collective
                (`first_not_finite`) finds the rank and the parameter
    straggler   rank 2 computes longer each step (`--slow` times, and 0.25 s more): every
                rank's step takes as long, the others' extra time spent waiting in the all-reduce
    unaveraged  the gradients are all-reduced (SUM) and never divided by N: each rank holds N times
                the gradient of the whole batch, which a reference on one process shows

Each rank trains a small MLP on its own slice of a fixed global batch (DDP's split), averaging
gradients with one all_reduce per parameter; it reports per step what it measured. With
`--dump DIR`, a rank whose collective fails writes what PyTorch's flight recorder holds (its last
collectives, as TORCH_FR_BUFFER_SIZE keeps them) to DIR/fr_rank<r> before it raises, and so does
a rank the launcher stops (SIGTERM, once a peer has failed) while it still waits: torch's own
dump, a pickle, which `python -m torch.distributed.flight_recorder.fr_trace DIR` reads.
"""

import argparse
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist

import zerobook as zb

FAULTS = ("none", "order", "nan", "straggler", "unaveraged")
WIDTH, PER_RANK, STEPS = 64, 8, 4


def model() -> torch.nn.Module:
    torch.manual_seed(0)  # every rank starts from the same weights
    return torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, 1)
    )


def global_batch(step: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's whole batch (every rank builds the same, and takes its slice)."""
    g = torch.Generator().manual_seed(step)
    x = torch.randn(world_size * PER_RANK, WIDTH, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def first_not_finite(net: torch.nn.Module) -> str | None:
    """The first parameter whose gradient holds a NaN or an infinity, by name; None if none."""
    for name, p in net.named_parameters():
        if p.grad is not None and not torch.isfinite(p.grad).all():
            return name
    return None


def reference_grads(world_size: int) -> list[torch.Tensor]:
    """The gradient of step 0's whole batch on one process: what DDP's average must equal."""
    net = model()
    x, y = global_batch(0, world_size)
    torch.nn.functional.mse_loss(net(x), y).backward()
    return [p.grad for p in net.parameters()]


def keep_flight_record(folder: str, rank: int) -> None:
    """Write this rank's flight recorder to folder/fr_rank<rank>."""
    (Path(folder) / f"fr_rank{rank}").write_bytes(flight_record())


def keep_flight_record_when_stopped(folder: str, rank: int) -> None:
    """On SIGTERM (torchrun stopping the ranks once one has failed), write this rank's flight
    recorder, then end by SIGTERM as before. A rank blocked in a collective runs the handler when
    the collective returns (its own timeout, within torchrun's 30 s before SIGKILL): without it,
    a peer that timed out first would leave the only record."""

    def keep_and_stop(number, _frame):
        keep_flight_record(folder, rank)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)

    signal.signal(signal.SIGTERM, keep_and_stop)


def flight_record() -> bytes:
    """This rank's flight recorder as torch dumps it (a pickled dict: its `entries`, oldest
    first, each collective's name, sequence number, sizes and stack; its `pg_config`). NCCL keeps
    its own (with each collective's state and, under TORCH_NCCL_ENABLE_TIMING, its GPU time)."""
    import torch._C._distributed_c10d as c10d

    if dist.get_backend() == "nccl" and hasattr(c10d, "_dump_nccl_trace"):
        return c10d._dump_nccl_trace(True, True)
    return c10d._dump_fr_trace(True, True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", choices=FAULTS, default="none")
    parser.add_argument("--slow", type=float, default=3.0, help="straggler: x compute")
    parser.add_argument(
        "--dump",
        help="a folder for the flight recorder of a failed rank (with --fault none: at the end)",
    )
    cli = parser.parse_args()
    me = zb.setup(verbose=False)
    if cli.dump:
        keep_flight_record_when_stopped(cli.dump, me.rank)
    try:
        train(cli, me)
    except RuntimeError:
        if cli.dump:
            keep_flight_record(cli.dump, me.rank)
        raise
    if cli.dump and cli.fault == "none":  # a healthy run's record, to compare with
        keep_flight_record(cli.dump, me.rank)


def train(cli, me) -> None:
    net, steps = model().to(me.device), []
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for step in range(STEPS):
        x, y = global_batch(step, me.world_size)
        x, y = (
            t[me.rank * PER_RANK : (me.rank + 1) * PER_RANK].to(me.device)
            for t in (x, y)
        )
        if cli.fault == "nan" and me.rank == 1 and step == 2:
            x[3, 5] = float("inf")  # one bad element in one rank's data
        began = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        if cli.fault == "straggler" and me.rank == 2:
            time.sleep((cli.slow - 1) * (time.perf_counter() - began) + 0.25)
        computed = time.perf_counter()
        bad_before = first_not_finite(net)
        for p in net.parameters():
            if cli.fault == "order" and me.rank == 0:
                dist.broadcast(p.grad, src=0)  # the bug: a different collective
            else:
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            if cli.fault != "unaveraged":
                p.grad /= me.world_size
        reduced = time.perf_counter()
        if step == 0:
            exact = reference_grads(me.world_size)
            norms = [
                p.grad.norm().item() / r.norm().item()
                for p, r in zip(net.parameters(), exact)
            ]
        opt.step()
        steps.append(
            dict(
                compute_s=computed - began,
                reduce_s=reduced - computed,
                not_finite_before=bad_before,
                not_finite_after=first_not_finite(net),
            )
        )
    zb.report(rank=me.rank, steps=steps, grad_over_reference=norms)


if __name__ == "__main__":
    main()
