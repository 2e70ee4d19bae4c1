"""Activation checkpointing: what it keeps, and the test ZeRO-3's hooks use to recognise its
recomputation. The runs under ZeRO-3 (each implementation, naive and recompute-aware hooks,
FSDP2) are asserted by the cells of chapters/activation_checkpointing.ipynb, which nbval runs."""

import torch

from zerobook.train import measure
from zerobook.accounting import activations
from zerobook.train.recompute import checkpoint_blocks, recompute_attention_scores
from zerobook.train.models import GPT, GPTConfig, next_token_loss, random_batch
from zerobook.zero.stage3 import in_backward

CONFIG = GPTConfig(vocab=64, hidden=32, layers=3, heads=4, seq_len=16)


def test_a_checkpointed_block_keeps_only_its_input_2sbh():
    tokens = random_batch(CONFIG, 2, seed=0)[:, :-1]
    torch.manual_seed(0)
    plain = measure.activation_bytes(GPT(CONFIG).to(torch.bfloat16), tokens)
    torch.manual_seed(0)
    model = checkpoint_blocks(GPT(CONFIG).to(torch.bfloat16))
    kept = measure.activation_bytes(model, tokens)
    inputs = [e for e in kept.entries if e[0] == (2, CONFIG.seq_len, CONFIG.hidden)][
        : CONFIG.layers
    ]
    per_layer = activations.activation_bytes_per_layer(
        CONFIG.seq_len, 2, CONFIG.hidden, CONFIG.heads, recompute=True
    )
    assert [e[2] for e in inputs] == [per_layer] * CONFIG.layers
    assert kept.bytes < plain.bytes / 5


def test_selective_recomputation_drops_the_scores_and_keeps_the_gradients_bit_for_bit():
    s, b, a = CONFIG.seq_len, 2, CONFIG.heads
    tokens = random_batch(CONFIG, b, seed=0)

    def model(selective: bool) -> torch.nn.Module:
        torch.manual_seed(0)
        plain = GPT(CONFIG).to(torch.bfloat16)
        return recompute_attention_scores(plain) if selective else plain

    kept = {
        m: measure.activation_bytes(model(m), tokens[:, :-1]).bytes
        for m in (False, True)
    }
    assert kept[False] - kept[True] == CONFIG.layers * (2 * a * s * s * b + s * s)
    grads = {}
    for selective in (False, True):
        trained = model(selective).float()
        next_token_loss(trained, tokens).backward()
        grads[selective] = torch.cat([p.grad.flatten() for p in trained.parameters()])
    assert torch.equal(grads[False], grads[True])


def test_in_backward_is_true_only_while_autograd_runs_backward():
    seen = []
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda grad: seen.append(in_backward()))
    assert not in_backward()
    y.sum().backward()
    assert seen == [True]
