"""Mixed-precision AdamW as the ZeRO paper counts it: 2 + 2 + 12 bytes per parameter.

The model's weights and gradients are 16-bit (bf16 or fp16); the optimizer keeps an fp32 master
copy of every weight plus AdamW's momentum and variance in fp32. A step upcasts the gradients,
updates the master weights, and copies them back into the 16-bit model.
"""

from __future__ import annotations

import torch

from zerobook.train.measure import optimizer_tensors


class MixedPrecisionAdamW:
    """AdamW over fp32 master copies of 16-bit parameters (K = 12 bytes of state per parameter)."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ):
        groups = param_groups(params)
        self.params = [p for group in groups for p in group["params"]]
        self.master = [
            torch.nn.Parameter(p.detach().float().clone()) for p in self.params
        ]
        masters = iter(self.master)
        self.inner = torch.optim.AdamW(
            [{**g, "params": [next(masters) for _ in g["params"]]} for g in groups],
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
        )

    @torch.no_grad()
    def step(self) -> None:
        """fp32 grads from the 16-bit ones, AdamW on the master copy, then back to 16 bits."""
        for param, master in zip(self.params, self.master):
            master.grad = None if param.grad is None else param.grad.float()
        self.inner.step()
        for param, master in zip(self.params, self.master):
            param.copy_(master)
            master.grad = None  # the fp32 gradient was only needed during the step

    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads(self.params, set_to_none)

    def state_tensors(self):
        """The fp32 master weights and every AdamW state tensor (momentum, variance, step)."""
        yield from self.master
        yield from optimizer_tensors(self.inner)


def param_groups(params) -> list[dict]:
    """torch.optim's two spellings (tensors, or dicts with "params" and options) as a list of dicts.

    Only trainable parameters are kept (frozen ones are not the optimizer's), each once: a tensor
    tied into two modules, or listed twice, is one parameter with one gradient.
    """
    params = list(params)
    groups = params if params and isinstance(params[0], dict) else [{"params": params}]
    seen, out = set(), []
    for group in groups:
        mine = [p for p in group["params"] if p.requires_grad and id(p) not in seen]
        seen.update(id(p) for p in mine)
        out.append({**group, "params": mine})
    return [g for g in out if g["params"]]


def zero_grads(params, set_to_none: bool = True) -> None:
    """Drop (or zero in place) the gradients of `params`, as torch.optim's zero_grad does."""
    for param in params:
        if set_to_none:
            param.grad = None
        elif param.grad is not None:
            param.grad.zero_()
