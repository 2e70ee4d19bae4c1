"""What a transformer keeps for backward, and how many parameters it has: Korthikanti et al.
(2022)'s per-layer activation terms and the GPT parameter count. Pure arithmetic (no torch);
bytes of 16-bit values (1-byte dropout masks).

    activation_bytes_per_layer(seq_len=2048, micro_batch=1, hidden=4096, heads=32)
"""

from __future__ import annotations

from zerobook.accounting.memory import check_positive


def activation_bytes_per_layer(
    seq_len: int, micro_batch: int, hidden: int, heads: int, *, recompute: bool = False
) -> float:
    """Activations one transformer layer keeps for backward, 16-bit (Korthikanti et al. 2022).

    s*b*h*(34 + 5*a*s/h) bytes; with full recomputation only the layer's input, 2*s*b*h.
    """
    for name, value in (
        ("seq_len", seq_len),
        ("micro_batch", micro_batch),
        ("hidden", hidden),
        ("heads", heads),
    ):
        check_positive(name, value)
    sbh = seq_len * micro_batch * hidden
    return 2 * sbh if recompute else sbh * (34 + 5 * heads * seq_len / hidden)


DROPOUT_TERMS = (
    "softmax dropout mask",
    "attention-probability dropout output",
    "attention dropout mask",
    "MLP dropout mask",
)


def activation_terms(seq_len: int, micro_batch: int, hidden: int, heads: int) -> dict:
    """Korthikanti et al.'s per-layer terms, in bytes (16-bit values, 1-byte dropout masks).

    They add up to `activation_bytes_per_layer`: 34*s*b*h + 5*a*s^2*b. Without dropout the
    DROPOUT_TERMS are not stored (the probabilities then feed attention x V directly).
    """
    activation_bytes_per_layer(
        seq_len, micro_batch, hidden, heads
    )  # validates the sizes
    sbh, as2b = seq_len * micro_batch * hidden, heads * seq_len**2 * micro_batch
    return {
        "LayerNorm inputs (two)": 4 * sbh,
        "QKV projection input": 2 * sbh,
        "Q and K (for Q K^T)": 4 * sbh,
        "softmax output": 2 * as2b,
        "softmax dropout mask": as2b,
        "attention-probability dropout output": 2 * as2b,
        "V": 2 * sbh,
        "output projection input": 2 * sbh,
        "attention dropout mask": sbh,
        "MLP first linear input": 2 * sbh,
        "GeLU input": 8 * sbh,
        "MLP second linear input": 8 * sbh,
        "MLP dropout mask": sbh,
    }


def transformer_params(hidden: int, layers: int, vocab: int) -> int:
    """Parameters of a GPT-style transformer: h*v + L*(12h^2 + 13h) + 2h (tied embeddings)."""
    for name, value in (("hidden", hidden), ("layers", layers), ("vocab", vocab)):
        check_positive(name, value)
    return hidden * vocab + layers * (12 * hidden**2 + 13 * hidden) + 2 * hidden
