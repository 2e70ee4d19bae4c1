"""Precision recipes: the bytes per parameter of weights, gradients and optimizer state that
each source in circulation counts (the ZeRO paper's 2 + 2 + 12 = 16, and the others), with who
counts it and what it holds. Pure data.

    RECIPES["zero_paper"].bytes_per_param  # 16
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Recipe:
    """A precision recipe: bytes per parameter of weights, gradients and optimizer state."""

    name: str
    param_bytes: float
    grad_bytes: float
    optimizer_bytes: float
    source: str
    what: str

    @property
    def bytes_per_param(self) -> float:
        return self.param_bytes + self.grad_bytes + self.optimizer_bytes

    def sizes(self) -> dict:
        """The keyword arguments `model_state_bytes` and `max_model_params` take."""
        return dict(
            param_bytes=self.param_bytes,
            grad_bytes=self.grad_bytes,
            optimizer_bytes=self.optimizer_bytes,
        )


RECIPES = {
    "zero_paper": Recipe(
        "mixed precision, ZeRO paper",
        2,
        2,
        12,
        "Rajbhandari et al. 2020",
        "fp16/bf16 weights and gradients; fp32 master weights, momentum and variance (K = 12)",
    ),
    "fp32_grad_accum": Recipe(
        "fp32 gradient accumulation",
        2,
        2 + 4,
        12,
        "Ultra-Scale Playbook (Hugging Face 2025)",
        "as the ZeRO paper, plus an fp32 buffer that accumulates gradients",
    ),
    "fp32_grads": Recipe(
        "fp32 gradients",
        2,
        4,
        12,
        "ml-engineering (Bekman)",
        "half-precision and fp32 weights, fp32 gradients only, two fp32 AdamW states",
    ),
    "params_and_adam_moments": Recipe(
        "bf16 weights + fp32 Adam moments",
        2,
        0,
        8,
        "How to Scale Your Model (scaling-book)",
        "weights and the two Adam moments only: no gradients, no fp32 master (a lower bound)",
    ),
}
