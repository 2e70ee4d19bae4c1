"""Transformer shapes the step model needs: parameters, FLOPs and activation bytes, counted exactly.

    LLAMA3_8B.num_params()               # 8,030,261,248 (Meta's release)
    LLAMA3_8B.flops_per_token(8192)      # 6 N' + 12 L h s: training FLOPs per token, N' without lookups

A block is attention (Q and O: h x h; K and V: h x kv_dim, grouped-query when kv_heads < heads)
and an MLP (SwiGLU: three h x ffn matrices; GELU: two), with two norms; the root is the
embedding, the output layer (unless tied to the embedding), learned positions if any, and the
final norm. Pure arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

# None: nothing recomputed; "matmul_inputs": only the matrix multiplies' inputs kept, the
# elementwise work recomputed (not Korthikanti's selective recomputation, which recomputes the
# attention scores: with flash attention there are none to keep); "full": each block's input
CHECKPOINTING = (None, "matmul_inputs", "full")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer. norm_params: 1 per norm (RMSNorm) or 2 (LayerNorm's bias)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    gated: bool = True
    tied: bool = False
    biases: bool = False
    norm_params: int = 1
    positions: int = 0

    def __post_init__(self):
        for field in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
            if not (isinstance(getattr(self, field), int) and getattr(self, field) > 0):
                raise ValueError(
                    f"{self.name}: {field} must be a positive integer, got {getattr(self, field)!r}"
                )
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(
                f"{self.name}: hidden must divide by heads and heads by kv_heads"
            )

    @property
    def kv_dim(self) -> int:
        return self.hidden // self.heads * self.kv_heads

    def block_matmul_params(self) -> int:
        """Weights of the block's matrix multiplies: Q, K, V, O and the MLP's matrices."""
        h = self.hidden
        return 2 * h * h + 2 * h * self.kv_dim + (3 if self.gated else 2) * h * self.ffn

    def block_params(self) -> int:
        h, biases = self.hidden, 0
        if self.biases:
            biases = 2 * h + 2 * self.kv_dim + (2 if self.gated else 1) * self.ffn + h
        return self.block_matmul_params() + biases + 2 * self.norm_params * h

    def root_params(self) -> int:
        """Embedding, output layer (unless tied), learned positions, final norm."""
        h = self.hidden
        return (
            (1 if self.tied else 2) * self.vocab * h
            + self.positions * h
            + self.norm_params * h
        )

    def num_params(self) -> int:
        return self.layers * self.block_params() + self.root_params()

    def lookup_params(self) -> int:
        """Parameters only looked up, never multiplied: the input embedding (unless it is also the
        output layer) and learned positions."""
        return (
            0 if self.tied else self.vocab * self.hidden
        ) + self.positions * self.hidden

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (forward and backward, Kaplan et al.'s 6 per weight, and PaLM's
        12 L h s for attention's two products), the lookups left out (they multiply nothing): the
        FLOPs every MFU in this course counts. torchtitan's published MFUs (April 2024, commit
        1ea476e9f) counted 6N with the embedding in (its 8B run: 0.568, 0.539 counted here);
        the difference is 6 x lookups. Today's torchtitan leaves the embedding out too."""
        return (
            6 * (self.num_params() - self.lookup_params())
            + 12 * self.layers * self.hidden * seq_len
        )

    def block_forward_flops(self, tokens: float, seq_len: int) -> float:
        """One block's forward: 2 FLOPs per weight per token, and QK^T and AV (4 h s per token)."""
        return (
            2 * self.block_matmul_params() * tokens + 4 * self.hidden * seq_len * tokens
        )

    def root_forward_flops(self, tokens: float) -> float:
        """The output layer's forward (the embedding is a lookup: no FLOPs)."""
        return 2 * self.vocab * self.hidden * tokens

    def block_activation_bytes(self, tokens: float, checkpointing: str | None) -> float:
        """16-bit activations one block keeps for backward (flash attention: no s x s scores; no
        dropout). None: every tensor backward reads — the norms' inputs and outputs, Q, K, V, the
        attention output, the MLP's inner tensors (4 of ffn width gated, 2 otherwise).
        "matmul_inputs": only the matrix multiplies' inputs, and Q, K, V for attention's backward
        (norms and activations recomputed: cheap elementwise work). "full": the block's input."""
        h, f = self.hidden, self.ffn
        if checkpointing == "full":
            return 2 * h * tokens
        if checkpointing == "matmul_inputs":
            return (2 * (3 * h + f) + 2 * h + 4 * self.kv_dim) * tokens
        return (12 * h + 4 * self.kv_dim + 2 * (4 if self.gated else 2) * f) * tokens


GPT3_175B = ModelSpec(
    "GPT-3 175B",
    layers=96,
    hidden=12288,
    heads=96,
    kv_heads=96,
    ffn=4 * 12288,
    vocab=50257,
    gated=False,
    tied=True,
    biases=True,
    norm_params=2,
    positions=2048,
)
LLAMA3_8B = ModelSpec(
    "Llama 3 8B", layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256
)
LLAMA3_70B = ModelSpec(
    "Llama 3 70B", layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256
)
MODELS = {m.name: m for m in (GPT3_175B, LLAMA3_8B, LLAMA3_70B)}


def course_gpt(config) -> ModelSpec:
    """The course's GPT (zerobook.train.models.GPT with this GPTConfig): LayerNorm, biases, a 4h MLP,
    the embedding tied to the output layer, fixed positions."""
    return ModelSpec(
        "course GPT",
        layers=config.layers,
        hidden=config.hidden,
        heads=config.heads,
        kv_heads=config.heads,
        ffn=4 * config.hidden,
        vocab=config.vocab,
        gated=False,
        tied=True,
        biases=True,
        norm_params=2,
    )
