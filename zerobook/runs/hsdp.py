"""HSDP from scratch: ZeRO-3 inside each group of ranks, an all-reduce of the shards across groups;
beside DDP and PyTorch's FSDP2 on a 2-D DeviceMesh.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.hsdp --shard 2

The ranks form a (replicas x shard) mesh, [[0, 1], [2, 3]] for 4 ranks and --shard 2: ranks 0 and 1
shard the model between them (as the GPUs of one node would, over NVLink), and so do 2 and 3;
ranks 0 and 2 hold the same shard and all-reduce its gradients (as across nodes, over the
network). Every method trains the same model from the same seed on the same data, every sum in
rank order (zerobook.train.parity):

    ddp    gradients all-reduced inside each group, then across groups (a hierarchical all-reduce,
           as NCCL does across nodes: the same additions in the same order as HSDP's)
    ours   Zero3AdamW(group=this rank's shard group, replicate_group=the ranks with its shard)
    fsdp2  fully_shard on every block and the root over DeviceMesh(("replicate", "shard"))

Reported by every rank, per method: the loss at every step, the final weights' largest difference
from DDP, the bytes kept, and the traffic of the last step by group.
"""

import argparse
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import zerobook as zb
from zerobook.fsdp2 import full_weights, measured_step
from zerobook.train.models import GPT, Block, GPTConfig
from zerobook.train.parity import ordered_sums
from zerobook.train.training import rank_batch
from zerobook.zero import Zero3AdamW

CONFIG = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)
LR, BATCH = 1e-3, 4


@dataclass
class Report:
    """runs[method]: losses, diff (from DDP), kept_bytes, traffic (by group, the last step)."""

    runs: dict
    shard_group: list
    replicate_group: list
    num_params: int


def hierarchical_average(mesh):
    """DDP's average over a 2-D mesh: all-reduce (SUM) inside the shard group, then across the
    replicas, then divide by N."""

    def average(model) -> None:
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.grad, group=mesh.get_group("shard"))
                dist.all_reduce(p.grad, group=mesh.get_group("replicate"))
                p.grad.div_(mesh.size())

    return average


def build(method: str, mesh, me: zb.Rank):
    """(model, optimizer, reduce) from seed 0."""
    torch.manual_seed(0)
    model = GPT(CONFIG).to(me.device)
    if method == "ours":
        zero = Zero3AdamW(
            model,
            unit_types=(Block,),
            lr=LR,
            group=mesh.get_group("shard"),
            replicate_group=mesh.get_group("replicate"),
        )
        return model, zero, None
    if method == "fsdp2":
        for module in [*model.blocks, model]:
            fully_shard(
                module, mesh=mesh
            )  # a 2-D mesh: shard on "shard", replicate on "replicate"
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    return model, optimizer, hierarchical_average(mesh) if method == "ddp" else None


def train(method: str, mesh, steps: int, me: zb.Rank) -> dict:
    model, optimizer, reduce = build(method, mesh, me)
    losses = []
    for step in range(steps):
        tokens = rank_batch(CONFIG, BATCH, step, me)
        loss, meter, kept = measured_step(model, optimizer, tokens, reduce)
        losses.append(loss.item())
    return {
        "losses": losses,
        "weights": full_weights(model, optimizer),
        "kept_bytes": kept,
        "traffic": meter.summary(by_group=True),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shard", type=int, default=2, help="ranks per shard group")
    parser.add_argument("--steps", type=int, default=5)
    cli = parser.parse_args()
    me = zb.setup()
    mesh = init_device_mesh(
        me.device.split(":")[0],
        (me.world_size // cli.shard, cli.shard),
        mesh_dim_names=("replicate", "shard"),
    )
    with ordered_sums():
        runs = {m: train(m, mesh, cli.steps, me) for m in ("ddp", "ours", "fsdp2")}
    reference = runs["ddp"]["weights"]
    for run in runs.values():
        run["diff"] = (run.pop("weights") - reference).abs().max().item()
    groups = [
        dist.get_process_group_ranks(mesh.get_group(d)) for d in ("shard", "replicate")
    ]
    zb.report(
        **asdict(
            Report(runs, *groups, sum(p.numel() for p in GPT(CONFIG).parameters()))
        )
    )


if __name__ == "__main__":
    main()
