"""zerobook.models, zerobook.precision and zerobook.measure: bytes counted from real tensors."""
import pytest
import torch

from zerobook import measure, memory
from zerobook.models import GPT, GPTConfig, random_batch
from zerobook.precision import MixedPrecisionAdamW

CONFIG = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)


def test_the_model_has_exactly_the_formulas_parameters():
    model = GPT(CONFIG)
    assert measure.num_params(model) == memory.transformer_params(CONFIG.hidden, CONFIG.layers, CONFIG.vocab)
    # the output layer is the embedding: tied, counted once
    assert sum(p.numel() for p in model.parameters()) == measure.num_params(model)


def test_unique_bytes_counts_a_storage_once():
    base = torch.zeros(100)
    assert measure.unique_bytes([base, base[:10], base.view(10, 10)]) == 400
    assert measure.unique_bytes([base, torch.zeros(100)]) == 800


STEP_COUNTER_BYTES = 4  # AdamW's step: one float32 scalar per parameter tensor


def one_step(model, optimizer):
    model.loss(random_batch(CONFIG, 4)).backward()
    optimizer.step()


def test_fp32_adamw_holds_16_bytes_per_parameter():
    model = GPT(CONFIG)
    optimizer = torch.optim.AdamW(model.parameters())
    one_step(model, optimizer)
    psi, tensors = measure.num_params(model), len(list(model.parameters()))
    held = measure.model_state_bytes(model, optimizer)
    assert (held.params, held.grads) == (4 * psi, 4 * psi)
    assert held.optimizer == 8 * psi + STEP_COUNTER_BYTES * tensors  # momentum, variance, a step each


def test_mixed_precision_adamw_holds_2_2_12_bytes_per_parameter():
    model = GPT(CONFIG).to(torch.bfloat16)
    optimizer = MixedPrecisionAdamW(model.parameters())
    one_step(model, optimizer)
    psi, tensors = measure.num_params(model), len(list(model.parameters()))
    held = measure.model_state_bytes(model, optimizer)
    assert (held.params, held.grads) == (2 * psi, 2 * psi)
    assert held.optimizer == 12 * psi + STEP_COUNTER_BYTES * tensors  # fp32 master, momentum, variance
    assert all(m.grad is None for m in optimizer.master)  # no fp32 gradients kept after the step


def test_mixed_precision_step_matches_fp32_adamw_on_the_master_weights():
    torch.manual_seed(0)
    reference = GPT(CONFIG)
    model = GPT(CONFIG).to(torch.bfloat16)
    model.load_state_dict({k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()})
    optimizer = MixedPrecisionAdamW(model.parameters(), lr=1e-2)
    master_before = [m.detach().clone() for m in optimizer.master]
    one_step(model, optimizer)
    for param, master, before in zip(model.parameters(), optimizer.master, master_before):
        assert not torch.equal(master, before)  # the step moved the fp32 weights
        assert torch.equal(param, master.to(torch.bfloat16))  # and the model holds their bf16 copy


def test_saved_activations_exclude_parameters_and_count_views_once():
    linear = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8, requires_grad=True)
    with measure.saved_activations(exclude=list(linear.parameters())) as record:
        y = linear(x)
        (y * y).sum()
    # Linear saves its input x (4x8 fp32); y * y saves y twice, one storage: 2 x 128 bytes.
    assert record.bytes == 128 + 128


def test_a_layers_activations_are_korthikantis_without_dropout():
    """Manual attention, no dropout, fp32: Korthikanti's 16-bit terms less the dropout masks and the
    dropout output, times two bytes; plus LayerNorm's statistics and the causal mask."""
    config = GPTConfig(vocab=128, hidden=64, layers=1, heads=4, seq_len=32)
    block = GPT(config).blocks[0]
    s, b, h, a = config.seq_len, 3, config.hidden, config.heads
    measured = measure.activation_bytes(block, torch.randn(b, s, h, requires_grad=True)).bytes
    without_dropout = 16 * s * b * h + a * s * s * b  # elements
    extras = 2 * 2 * s * b * 4 + s * s  # two LayerNorms' mean and rstd (fp32), the bool mask
    assert measured == 4 * without_dropout + extras
