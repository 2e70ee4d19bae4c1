"""The weights a student's model computes with, in a model of the harness's own.

    fresh = weights_used(model, me, "your ZeRO-3")   # a GPT with no hook of the student's

A capstone run is judged at the end by the held-out loss and a sample. Measured on the
student's own model, the student's hooks run too: a forward hook that writes the next byte's
answer into the logits whenever gradients are off would make any model look good. So the
harness takes the weights themselves: its own forward hooks, registered first on every module
that holds parameters, copy them while each module computes (a ZeRO-3 unit is gathered then),
during one forward without gradients; they go into a fresh GPT, which is what is measured.
Data parallelism keeps every rank's weights the same: the harness checks that they are, bit for
bit (the ranks' sums of each parameter, all-gathered), and says so if they are not.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from zerobook.train.models import GPT

ALL_GATHER = (
    dist.all_gather_into_tensor
)  # the harness's own, taken before any replacement


@torch.no_grad()
def weights_used(model: torch.nn.Module, me, name: str) -> torch.nn.Module:
    """A fresh GPT (model's config) holding the full weights `model` computes with."""
    names = {id(p): n for n, p in model.named_parameters()}
    captured: dict[str, torch.Tensor] = {}

    def capture(module, args, output) -> None:
        for param in module.parameters(recurse=False):
            if id(param) in names:
                captured[names[id(param)]] = param.detach().clone()

    owners = [
        m
        for m in model.modules()
        if next(m.parameters(recurse=False), None) is not None
    ]
    handles = [m.register_forward_hook(capture, prepend=True) for m in owners]
    try:
        model(torch.zeros(1, model.config.seq_len, dtype=torch.long, device=me.device))
    finally:
        for handle in handles:
            handle.remove()
    fresh = GPT(model.config).to(me.device)
    for key, param in fresh.named_parameters():
        if key not in captured or captured[key].shape != param.shape:
            raise RuntimeError(
                f"{name}: {key} was not full while its module computed "
                f"({tuple(captured[key].shape) if key in captured else 'never seen'}): "
                "gather a unit's weights before it computes"
            )
        param.copy_(captured[key])
    differing = differing_ranks(fresh, me)
    if differing:
        raise RuntimeError(
            f"{name}: after training, rank(s) {differing} compute with other weights than "
            "rank 0: data parallelism keeps one model on every rank (are the gradients "
            "averaged across ranks, every step?)"
        )
    return fresh


def differing_ranks(model: torch.nn.Module, me) -> list[int]:
    """The ranks whose weights differ from rank 0's (each parameter's sum, all-gathered)."""
    sums = torch.stack([p.detach().double().sum() for p in model.parameters()])
    every = torch.empty(
        me.world_size * sums.numel(), dtype=sums.dtype, device=sums.device
    )
    ALL_GATHER(every, sums)
    every = every.view(me.world_size, -1)
    return [r for r in range(1, me.world_size) if not torch.equal(every[r], every[0])]
