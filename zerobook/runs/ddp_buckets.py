"""Which buckets DDP all-reduces, step by step, under its three bucketing regimes.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.ddp_buckets

A comm hook records every bucket DDP's reducer hands it (its index, its bytes and its
parameters, by their index in `model.parameters()`), then averages it as DDP's default hook
does. Three settings, a few SGD steps each: the defaults (`find_unused_parameters=False`),
`static_graph=True` and `find_unused_parameters=True`. Rank 0 reports, per setting, the
buckets of every step, and the bytes of each parameter.
"""

import argparse

import torch
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

import zerobook as zb
from zerobook.train.models import GPT, GPTConfig, next_token_loss
from zerobook.train.training import rank_batch

CONFIG = GPTConfig(
    vocab=128, hidden=128, layers=2, heads=4, seq_len=32
)  # ddp_scratch's
SETTINGS = {
    "default": {},
    "static_graph": {"static_graph": True},
    "find_unused_parameters": {"find_unused_parameters": True},
}


def recording_hook(index_of: dict, steps: list):
    """DDP's default all-reduce hook, recording each bucket into the last list of `steps`."""

    def hook(process_group, bucket):
        params = [index_of[id(p)] for p in bucket.parameters()]
        steps[-1].append(
            {"index": bucket.index(), "bytes": bucket.buffer().nbytes, "params": params}
        )
        return allreduce_hook(process_group, bucket)

    return hook


def buckets_per_step(me: zb.Rank, steps: int, **ddp_kwargs) -> list[list[dict]]:
    """`steps` SGD steps of the GPT under DDP(**ddp_kwargs); the buckets of each step."""
    torch.manual_seed(0)
    model = GPT(CONFIG).to(me.device)
    index_of = {id(p): i for i, p in enumerate(model.parameters())}
    wrapped = DistributedDataParallel(model, **ddp_kwargs)
    recorded: list[list[dict]] = []
    wrapped.register_comm_hook(None, recording_hook(index_of, recorded))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        recorded.append([])
        optimizer.zero_grad()
        next_token_loss(wrapped, rank_batch(CONFIG, 2, 1000 + step, me)).backward()
        optimizer.step()
    return recorded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    cli = parser.parse_args()
    me = zb.setup()
    model = GPT(CONFIG)
    zb.report(
        param_bytes=[p.numel() * p.element_size() for p in model.parameters()],
        settings={
            name: buckets_per_step(me, cli.steps, **kwargs)
            for name, kwargs in SETTINGS.items()
        },
    )


if __name__ == "__main__":
    main()
