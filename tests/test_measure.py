"""zerobook.measure: bytes counted from real tensors (each storage once), saved activations."""

import pytest
import torch

from zerobook import measure
from zerobook.models import GPT, GPTConfig


def test_unique_bytes_counts_a_storage_once():
    base = torch.zeros(100)
    assert measure.unique_bytes([base, base[:10], base.view(10, 10)]) == 400
    assert measure.unique_bytes([base, torch.zeros(100)]) == 800


def test_num_params_counts_views_of_one_flat_buffer_and_a_weight_tied_twice_once():
    from zerobook.labs.memory import CONFIG, flatten_into_one_buffer

    model = GPT(CONFIG)
    psi = sum(p.numel() for p in model.parameters())
    flatten_into_one_buffer(model, world_size=2)  # every weight a view of one storage
    assert len({measure.storage_key(p) for p in model.parameters()}) == 1
    assert measure.num_params(model) == psi
    tied = torch.nn.Module()
    tied.a = torch.nn.Parameter(torch.zeros(6))
    tied.b = torch.nn.Parameter(tied.a.data)  # another Parameter over the same elements
    assert measure.num_params(tied) == 6


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
    measured = measure.activation_bytes(
        block, torch.randn(b, s, h, requires_grad=True)
    ).bytes
    without_dropout = 16 * s * b * h + a * s * s * b  # elements
    extras = (
        2 * 2 * s * b * 4 + s * s
    )  # two LayerNorms' mean and rstd (fp32), the bool mask
    assert measured == 4 * without_dropout + extras


@pytest.mark.parametrize("options", [{}, {"foreach": True}, {"fused": True}])
def test_the_cpu_adamw_rate_is_a_rate_for_every_implementation(options):
    assert measure.adamw_elements_per_second(1000, steps=1, repeats=2, **options) > 0
