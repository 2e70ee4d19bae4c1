"""Activation checkpointing: what it keeps, and ZeRO-3's hooks under its recomputation."""
import torch

import zerobook as zb
from zerobook import measure, memory
from zerobook.checkpointing import checkpoint_blocks
from zerobook.models import GPT, GPTConfig, random_batch
from zerobook.zero.stage3 import in_backward

CONFIG = GPTConfig(vocab=64, hidden=32, layers=3, heads=4, seq_len=16)


def test_a_checkpointed_block_keeps_only_its_input_2sbh():
    tokens = random_batch(CONFIG, 2, seed=0)[:, :-1]
    torch.manual_seed(0)
    plain = measure.activation_bytes(GPT(CONFIG).to(torch.bfloat16), tokens)
    torch.manual_seed(0)
    model = checkpoint_blocks(GPT(CONFIG).to(torch.bfloat16))
    kept = measure.activation_bytes(model, tokens)
    inputs = [e for e in kept.entries if e[0] == (2, CONFIG.seq_len, CONFIG.hidden)][:CONFIG.layers]
    per_layer = memory.activation_bytes_per_layer(CONFIG.seq_len, 2, CONFIG.hidden, CONFIG.heads, recompute=True)
    assert [e[2] for e in inputs] == [per_layer] * CONFIG.layers
    assert kept.bytes < plain.bytes / 5


def test_in_backward_is_true_only_while_autograd_runs_backward():
    seen = []
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda grad: seen.append(in_backward()))
    assert not in_backward()
    y.sum().backward()
    assert seen == [True]


def test_zero3_hooks_under_recomputation():
    configs = "plain,reentrant,reentrant_naive,nonreentrant_naive_full,nonreentrant_full"
    runs = zb.torchrun("zerobook.labs.zero3_recompute", nproc=2, echo=False,
                       args=["--configs", configs]).ranks[0]["runs"]
    sent = {name: sum(r["sent"].values()) for name, r in runs.items() if "sent" in r}
    for name in ("reentrant", "nonreentrant_full"):  # recompute-aware: plain ZeRO-3's bytes, same weights
        assert sent[name] == sent["plain"] and runs[name]["diff"] == 0.0
        assert runs[name]["forwards"]["blocks.0.block"] == 2 and runs[name]["gathers"]["blocks.0.block"] == 2
    assert runs["reentrant_naive"]["gathers"]["blocks.0.block"] == 3  # gathered, freed, gathered again
    blocks = sum(v for k, v in runs["plain"]["padded"].items() if k != "root")
    assert sent["reentrant_naive"] - sent["plain"] == blocks * (2 - 1) / 2  # one all-gather, N = 2
    assert "storage of size 0" in runs["nonreentrant_naive_full"]["error"]
