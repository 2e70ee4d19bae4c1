"""Activation checkpointing under our ZeRO-3: what the recomputation gathers, and whether the
hooks survive it.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.zero3_recompute

The same GPT (seed 0, fp32, one unit per block plus the root) trains `--steps` steps under each
configuration:

  plain                no checkpointing
  nonreentrant         torch.utils.checkpoint (use_reentrant=False) around every block
  reentrant            the same with use_reentrant=True
  reentrant_naive      reentrant, with hooks unaware of recomputation: they free a unit after every
                       forward, the recomputed one included
  nonreentrant_naive   non-reentrant with those naive hooks
  nonreentrant_naive_full  the same, with the recomputation's early stop turned off
                       (torch.utils.checkpoint.set_checkpoint_early_stop(False))
  nonreentrant_full    that, with the recompute-aware hooks
  selective, selective_naive   selective recomputation (only attention's scores, from Q, K and V),
                       with each kind of hooks
  fsdp2, fsdp2_nonreentrant, fsdp2_reentrant   PyTorch's FSDP2 (every unit resharded after
                       forward, the root too), without and with each checkpointing

Reported per configuration: the final weights' largest difference from `plain`, the elements each
collective sent in the last step (the traffic meter), and for ours the all-gathers each unit
issued in that step and how many times each unit's forward ran to its end (its forward hook
fired); or the error, if the configuration failed (its first line; every rank fails alike).
"""

import argparse

import torch
from torch.utils.checkpoint import set_checkpoint_early_stop

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.fsdp2 import full_weights, shard_blocks
from zerobook.train.models import GPT, Block, GPTConfig, next_token_loss
from zerobook.train.recompute import checkpoint_blocks, recompute_attention_scores
from zerobook.train.training import rank_batch
from zerobook.zero import Zero3AdamW

CONFIGS = {  # name -> (checkpointing: None | "nonreentrant" | "reentrant" | "selective",
    #                  recompute-aware hooks,
    #                  non-reentrant recomputation stops once it has every tensor backward needs)
    "plain": (None, True, True),
    "nonreentrant": ("nonreentrant", True, True),
    "reentrant": ("reentrant", True, True),
    "reentrant_naive": ("reentrant", False, True),
    "nonreentrant_naive": ("nonreentrant", False, True),
    "nonreentrant_naive_full": ("nonreentrant", False, False),
    "nonreentrant_full": ("nonreentrant", True, False),
    "selective": ("selective", True, True),
    "selective_naive": ("selective", False, True),
    "fsdp2": (None, None, True),
    "fsdp2_nonreentrant": ("nonreentrant", None, True),
    "fsdp2_reentrant": ("reentrant", None, True),
}


def build(name: str, config: GPTConfig, me: zb.Rank):
    """(model, optimizer) of a configuration, from seed 0."""
    mode, aware, _ = CONFIGS[name]
    torch.manual_seed(0)
    model = GPT(config).to(me.device)
    if mode == "selective":
        recompute_attention_scores(model)
    elif mode:
        checkpoint_blocks(model, reentrant=mode == "reentrant")
    if not name.startswith("fsdp2"):
        return model, Zero3AdamW(
            model,
            unit_types=(Block,),
            lr=1e-3,
            reshard_root=True,
            recompute_aware=aware,
        )
    shard_blocks(
        model,
        me,
        blocks=[m for m in model.modules() if isinstance(m, Block)],
        reshard_after_forward=True,
    )
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)


def train(name: str, config: GPTConfig, steps: int, batch: int, me: zb.Rank) -> dict:
    model, optimizer = build(name, config, me)
    units = getattr(optimizer, "units", [])
    for step in range(steps):
        before = {u.name: u.gathers for u in units}
        tokens = rank_batch(config, batch, step, me)
        optimizer.events = []
        with CommMeter() as meter, set_checkpoint_early_stop(CONFIGS[name][2]):
            next_token_loss(model, tokens).backward()
            optimizer.step()
        optimizer.zero_grad()
    out = {
        "sent": {op: e["bus_bytes"] / 4 for op, e in meter.summary().items()},
        "gathers": {u.name: u.gathers - before[u.name] for u in units},
        "forwards": {
            u.name: sum(
                (e.what, e.unit) == ("computed", u.name) for e in optimizer.events
            )
            for u in units
        },
        "padded": {u.name: u.flat.padded for u in units},
    }
    return {**out, "weights": full_weights(model, optimizer)}


def attempt(name: str, config: GPTConfig, steps: int, batch: int, me: zb.Rank) -> dict:
    """Train, or report how it failed (every rank fails at the same point: no collective hangs)."""
    try:
        return train(name, config, steps, batch, me)
    except RuntimeError as error:
        return {"error": str(error).splitlines()[0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2)
    cli = parser.parse_args()
    me = zb.setup()
    config = GPTConfig(vocab=128, hidden=64, layers=cli.layers, heads=4, seq_len=32)
    runs = {
        name: attempt(name, config, cli.steps, cli.batch, me)
        for name in cli.configs.split(",")
    }
    reference = runs["plain"]["weights"] if "plain" in runs else None
    for run in runs.values():
        if "weights" in run:
            weights = run.pop("weights")
            run["diff"] = (
                None if reference is None else (weights - reference).abs().max().item()
            )
    zb.report(runs=runs, num_params=sum(p.numel() for p in GPT(config).parameters()))


if __name__ == "__main__":
    main()
