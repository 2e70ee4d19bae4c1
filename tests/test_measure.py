"""zerobook.train.measure: bytes counted from real tensors (each storage once), saved activations."""

import pytest
import torch
import torch.nn.functional as F

from zerobook.train import measure
from zerobook.train.models import GPT, GPTConfig


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


def test_live_bytes_follows_what_is_allocated_and_freed():
    """LiveBytes counts the storages the ops inside allocate while a tensor holds them: views
    share their base's, in-place results and tensors from outside add nothing."""
    x = torch.ones(1000)  # from outside: not counted
    with measure.LiveBytes() as counter:
        a = x * 2  # 4,000 bytes
        view = a[:10]  # the same storage
        b = a + 1  # 8,000 alive
        b.add_(1)  # in place: nothing new
        del a
        assert counter.live == 8_000  # the view still holds a's storage
        del view
        assert counter.live == 4_000 and counter.peak == 8_000
        counter.reset()
        del b
    assert counter.live == 0 and counter.peak == 4_000


def test_the_loss_on_upcast_logits_peaks_at_twelve_bytes_per_logit():
    """PyTorch's cross-entropy on an fp32 copy of bf16 logits (the course's next_token_loss,
    torchtitan's loss): 2 + 4 + 4 bytes per logit while the forward computes it, 4 kept for
    backward (the fp32 log-probabilities, as saved_activations counts), 12 at the start of
    backward (those, their gradient and the logits' fp32 gradient)."""
    batch, seq, vocab = 2, 64, 512
    logits_count = batch * seq * vocab
    hidden = torch.randn(batch, seq, 32, dtype=torch.bfloat16)
    head = torch.randn(vocab, 32, dtype=torch.bfloat16, requires_grad=True)
    targets = torch.randint(vocab, (batch, seq))

    def loss():
        logits = hidden @ head.t()
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    with measure.LiveBytes() as counter, measure.saved_activations() as saved:
        value = loss()
        forward, kept = counter.peak, counter.live
        counter.reset()
        value.backward()
    per_logit = lambda n: n // logits_count  # noqa: E731 (the rest: a few scalars per row)
    assert (per_logit(forward), per_logit(kept), per_logit(counter.peak)) == (10, 4, 12)
    assert per_logit(saved.bytes) == 4
