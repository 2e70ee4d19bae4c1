"""ShardedOptimizer as a torch.optim.Optimizer, on this launch's ranks, every sum in rank order:

* DDP + torch.optim.AdamW (the reference) and DDP + ShardedOptimizer(AdamW), both under an LR
  scheduler (--scheduler lambda | cosine), two parameter groups, the second added after
  construction (add_param_group), and step(closure);
* the sharded run checkpoints after STEPS // 2 steps (consolidate_state_dict(to=0), rank 0 saves
  model, optimizer and scheduler), goes on, and a fresh model and optimizer load the checkpoint on
  every rank and train the same remaining steps.

Reported by every rank: the largest weight difference of each run from the reference, the lr its
own shard's optimizer stepped with at each step against the scheduler's, whether the consolidated
state dict equals the reference AdamW's (same keys, same tensors), and what the closure returned.
"""

import argparse

import torch

import zerobook as zb
from zerobook.data_parallel.ddp import average_gradients
from zerobook.train.models import GPT, GPTConfig, next_token_loss
from zerobook.train.parity import ordered_sums
from zerobook.train.training import flat_weights, rank_batch
from zerobook.zero import ShardedOptimizer

CONFIG = GPTConfig(vocab=64, hidden=32, layers=2, heads=4, seq_len=16)
STEPS, BATCH, LR = 6, 2, 1e-2


def groups(model) -> list[dict]:
    params = list(model.parameters())
    return [
        {"params": [p for p in params if p.dim() > 1], "weight_decay": 0.1},
        {
            "params": [p for p in params if p.dim() <= 1],
            "weight_decay": 0.0,
            "lr": LR / 2,
        },
    ]


def scheduler_for(optimizer, kind: str):
    if kind == "lambda":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (1 + step))
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS)


def build(kind: str, sharded: bool):
    torch.manual_seed(0)
    model = GPT(CONFIG)
    first, second = groups(model)
    if sharded:
        optimizer = ShardedOptimizer([first], torch.optim.AdamW, lr=LR)
    else:
        optimizer = torch.optim.AdamW([first], lr=LR)
    optimizer.add_param_group(second)
    return model, optimizer, scheduler_for(optimizer, kind)


def train(model, optimizer, scheduler, steps: range, me: zb.Rank) -> dict:
    lrs, losses = [], []
    for step in steps:
        batch = rank_batch(CONFIG, BATCH, step, me)

        def closure():
            optimizer.zero_grad()
            loss = next_token_loss(model, batch)
            loss.backward()
            average_gradients(model, flat=True)
            return loss

        losses.append(optimizer.step(closure).item())
        lrs.append(stepped_lrs(optimizer))
        scheduler.step()
    return {"lrs": lrs, "losses": losses}


def stepped_lrs(optimizer) -> list:
    """The lr of each group as the step just used it: for ShardedOptimizer, read from this rank's
    own optimizer (None for a group it owns nothing of)."""
    if not isinstance(optimizer, ShardedOptimizer):
        return [g["lr"] for g in optimizer.param_groups]
    mine = optimizer.local_group
    return [
        optimizer.local.param_groups[mine[i]]["lr"] if i in mine else None
        for i in range(len(optimizer.param_groups))
    ]


def same_state(a: dict, b: dict) -> bool:
    """Two torch.optim state dicts hold the same groups and the same tensors, bit for bit."""
    if a["param_groups"] != b["param_groups"] or a["state"].keys() != b["state"].keys():
        return False
    return all(
        torch.equal(
            torch.as_tensor(a["state"][i][k]), torch.as_tensor(b["state"][i][k])
        )
        for i in a["state"]
        for k in a["state"][i]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scheduler", choices=["lambda", "cosine"], default="cosine")
    parser.add_argument("--dir", required=True)
    cli = parser.parse_args()
    me = zb.setup(verbose=False)
    path, half = f"{cli.dir}/checkpoint.pt", STEPS // 2
    with ordered_sums():
        reference = build(cli.scheduler, sharded=False)
        expected = train(*reference, range(STEPS), me)
        sharded = build(cli.scheduler, sharded=True)
        first = train(*sharded, range(half), me)
        sharded[1].consolidate_state_dict(to=0)
        if me.rank == 0:
            torch.save(
                {
                    "model": sharded[0].state_dict(),
                    "optimizer": sharded[1].state_dict(),
                    "scheduler": sharded[2].state_dict(),
                },
                path,
            )
        torch.distributed.barrier()
        second = train(*sharded, range(half, STEPS), me)
        resumed = build(cli.scheduler, sharded=True)
        saved = torch.load(path)
        resumed[0].load_state_dict(saved["model"])
        resumed[1].load_state_dict(saved["optimizer"])
        resumed[2].load_state_dict(saved["scheduler"])
        after = train(*resumed, range(half, STEPS), me)
        sharded[1].consolidate_state_dict(to=None)
    zb.report(
        expected_lrs=expected["lrs"],
        lrs=first["lrs"] + second["lrs"],
        resumed_lrs=after["lrs"],
        sharded_diff=(flat_weights(sharded[0]) - flat_weights(reference[0]))
        .abs()
        .max()
        .item(),
        resumed_diff=(flat_weights(resumed[0]) - flat_weights(sharded[0]))
        .abs()
        .max()
        .item(),
        resumed_losses_equal=after["losses"] == second["losses"],
        state_equal=same_state(sharded[1].state_dict(), reference[1].state_dict()),
        closure_losses=first["losses"],
        owned=[len(o) for o in sharded[1].owned],
    )


if __name__ == "__main__":
    main()
