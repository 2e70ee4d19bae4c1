"""FSDP x TP on a 2-D device mesh: tensor parallelism inside each row, FSDP across the rows.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.fsdp2_tp

Four ranks as a 2 x 2 mesh ("dp", "tp"): ranks {0, 1} and {2, 3} each split an MLP's two Linears
(ColwiseParallel, then RowwiseParallel: one all-reduce of the activations per forward), and
`fully_shard` on the "dp" dimension shards those pieces again over {0, 2} and {1, 3}. The weights
and inputs are small integers, so every sum is exact in fp32 whatever its order or split: the
gradients and one SGD step are compared for equality with the whole MLP on the whole batch, on one
rank. Reported: each parameter's placements and local shape, the collectives by group, equality.
"""

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)
from torch.profiler import ProfilerActivity, profile

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter

SHAPE = (2, 2)  # (dp, tp)
HIDDEN, BATCH, LR = 8, 8, 0.125  # a power of two: the SGD step stays exact


def integer_mlp() -> nn.Sequential:
    """Linear(8, 32), ReLU, Linear(32, 8) with weights and biases in {-1, 0, 1}: every partial sum
    is a small integer (or a power-of-two fraction of one), exact in fp32 in any order."""
    torch.manual_seed(0)
    mlp = nn.Sequential(
        nn.Linear(HIDDEN, 4 * HIDDEN), nn.ReLU(), nn.Linear(4 * HIDDEN, HIDDEN)
    )
    with torch.no_grad():
        for p in mlp.parameters():
            p.copy_(torch.randint(-1, 2, p.shape))
    return mlp


def loss_of(mlp, x) -> torch.Tensor:
    return mlp(x).pow(2).mean()


def sharded_mlp(device_type: str):
    """TP on each row of the mesh (Colwise, then Rowwise), then FSDP on each column."""
    mesh = init_device_mesh(device_type, SHAPE, mesh_dim_names=("dp", "tp"))
    plan = {"0": ColwiseParallel(), "2": RowwiseParallel()}  # the MLP's two Linears
    mlp = parallelize_module(integer_mlp(), mesh["tp"], plan)
    return fully_shard(mlp, mesh=mesh["dp"]), mesh


def functional_collectives(profiler) -> dict:
    """Calls of torch's functional collectives (what DTensor's TP issues), by name."""
    calls = {}
    for e in profiler.events():
        namespace, _, op = e.name.partition("::")
        if namespace == "_c10d_functional" and not op.startswith(("wait", "_")):
            calls[op] = calls.get(op, 0) + 1
    return calls


def main() -> None:
    me = zb.setup()
    assert me.world_size == SHAPE[0] * SHAPE[1], f"run on {SHAPE[0] * SHAPE[1]} ranks"
    mlp, mesh = sharded_mlp(me.device.split(":")[0])
    x = (
        torch.randint(-1, 2, (BATCH, HIDDEN)).float().to(me.device)
    )  # every rank draws the same batch
    part = x.chunk(SHAPE[0])[
        mesh["dp"].get_local_rank()
    ]  # one half per dp rank, the same along tp
    optimizer = torch.optim.SGD(mlp.parameters(), lr=LR)
    with CommMeter() as meter, profile(activities=[ProfilerActivity.CPU]) as profiler:
        loss_of(mlp, part).backward()
    grads = [p.grad.full_tensor().cpu() for p in mlp.parameters()]
    optimizer.step()
    whole = integer_mlp()
    loss_of(whole, x.cpu()).backward()
    torch.optim.SGD(whole.parameters(), lr=LR).step()
    zb.report(
        params=[
            {
                "name": n,
                "shape": list(p.shape),
                "placements": [str(q) for q in p.placements],
                "local": list(p.to_local().shape),
            }
            for n, p in mlp.named_parameters()
        ],
        mesh=mesh.mesh.tolist(),
        dp_group=mesh["dp"].mesh.tolist(),
        tp_group=mesh["tp"].mesh.tolist(),
        c10d=meter.summary(by_group=True),
        functional=functional_collectives(profiler),
        grad_max=max(g.abs().max().item() for g in grads),
        grads_equal=all(
            torch.equal(g, w.grad) for g, w in zip(grads, whole.parameters())
        ),
        step_equal=all(
            torch.equal(p.full_tensor().cpu(), w)
            for p, w in zip(mlp.parameters(), whole.parameters())
        ),
    )


if __name__ == "__main__":
    main()
