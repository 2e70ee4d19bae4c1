"""Our ZeRO-3 and PyTorch's FSDP2 (`fully_shard`) on the same model, seed and data.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.labs.fsdp2_side_by_side

Both shard one unit per transformer block plus the root, reshard after forward (the root kept, as
FSDP2 does), and run the same AdamW in fp32. Reported by every rank, per method: the loss at every
step, the final weights' largest difference from DDP, the traffic of the last step (the meter
wraps torch.distributed's Python calls, which FSDP2's collectives go through), and the median
step time.
"""
import argparse
import statistics
import time

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import zerobook as zb
from zerobook.comm import CommMeter
from zerobook.ddp import average_gradients
from zerobook.models import GPT, Block, GPTConfig, next_token_loss, random_batch
from zerobook.zero import Zero3AdamW

LR, BATCH = 1e-3, 4


def build(method: str, config: GPTConfig, me: zb.Rank):
    """(model, optimizer, reduce) for one method, from seed 0; reduce averages DDP's gradients."""
    torch.manual_seed(0)
    model = GPT(config).to(me.device)
    if method == "ours":
        return model, Zero3AdamW(model, unit_types=(Block,), lr=LR), None
    if method == "fsdp2":
        mesh = init_device_mesh(me.device.split(":")[0], (me.world_size,))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    return model, optimizer, (average_gradients if method == "ddp" else None)


def full_weights(method: str, model, optimizer) -> torch.Tensor:
    if method == "ours":
        optimizer.gather_all()
    tensors = [p.full_tensor() if hasattr(p, "full_tensor") else p for p in model.parameters()]
    return torch.cat([t.detach().float().reshape(-1).cpu() for t in tensors])


def train(method: str, config: GPTConfig, steps: int, me: zb.Rank) -> dict:
    model, optimizer, reduce = build(method, config, me)
    losses, seconds = [], []
    for step in range(steps):
        tokens = random_batch(config, BATCH * me.world_size, seed=step)[me.rank * BATCH:(me.rank + 1) * BATCH]
        start = time.perf_counter()
        with CommMeter() as meter:
            loss = next_token_loss(model, tokens.to(me.device))
            loss.backward()
            if reduce is not None:
                reduce(model)
            optimizer.step()
        optimizer.zero_grad()
        seconds.append(time.perf_counter() - start)
        losses.append(loss.item())
    return {"losses": losses, "weights": full_weights(method, model, optimizer),
            "traffic": meter.summary(), "seconds": statistics.median(seconds[1:] or seconds)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--layers", type=int, default=2)
    cli = parser.parse_args()
    me = zb.setup()
    config = GPTConfig(vocab=128, hidden=64, layers=cli.layers, heads=4, seq_len=32)
    runs = {m: train(m, config, cli.steps, me) for m in ("ddp", "ours", "fsdp2")}
    reference = runs["ddp"]["weights"]
    for run in runs.values():
        run["diff"] = (run.pop("weights") - reference).abs().max().item()
    zb.report(runs=runs, weight_scale=reference.abs().max().item(),
              num_params=sum(p.numel() for p in GPT(config).parameters()))


if __name__ == "__main__":
    main()
