"""ZeRO++'s hpZ on our ZeRO-3 (zerobook.zero.hpz) and FSDP2's nearest knob,
`fully_shard(reshard_after_forward=g)`: two "nodes" of ranks on this machine, the bytes of each
all-gather by the group it ran over, the secondary shard's bytes, and the weights after two steps.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.zeropp_hpz

Every rank reports, per way (ZeRO-3, hpZ, FSDP2 with reshard_after_forward=g): its collectives of
the second step by group ({"all_gather_into_tensor over (0, 1)": {calls, bytes, bus_bytes}, ...}:
the world's group has no "over"), and for ours the secondary bytes held between forward and
backward, and the weights after the two steps (to compare bit for bit).
"""

import torch

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.fsdp2 import shard_blocks
from zerobook.train.models import GPT, next_token_loss
from zerobook.zero.trials import start, CONFIG, batch, zero3
from zerobook.train.training import flat_weights
from zerobook.zero.hpz import hpz_unit


def ours(me, data, node_size: int | None) -> dict:
    model, zero = zero3(hpz_unit(node_size) if node_size else None, me.device)
    held = []
    for step in range(2):
        with CommMeter() as meter:
            loss = next_token_loss(model, batch(data, step, me, 8))
            held.append(
                sum(
                    u.secondary.nbytes
                    for u in zero.units
                    if getattr(u, "secondary", None) is not None
                )
            )
            loss.backward()
            zero.step()
        zero.zero_grad()
    zero.gather_all()
    return {"sent": meter.summary(by_group=True), "secondary_bytes": held[-1],
            "padded": {u.name: u.flat.padded for u in zero.units},
            "weights": flat_weights(model).tolist()}  # fmt: skip


def fsdp2(me, data, node_size: int) -> dict:
    torch.manual_seed(0)
    model = GPT(CONFIG).to(me.device)
    shard_blocks(model, me, reshard_after_forward=node_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(2):
        with CommMeter() as meter:
            next_token_loss(model, batch(data, step, me, 8)).backward()
            optimizer.step()
        optimizer.zero_grad()
    return {"sent": meter.summary(by_group=True)}


def main() -> None:
    cli, me, data = start(__doc__)
    zb.report(
        world_size=me.world_size,
        node_size=cli.node_size,
        ways={
            "ZeRO-3": ours(me, data, None),
            "hpZ": ours(me, data, cli.node_size),
            "FSDP2": fsdp2(me, data, cli.node_size),
        },
    )


if __name__ == "__main__":
    main()
