"""The capstone's training schedule (zerobook.runs.capstone): warm-up, cosine, floor; AdamW's two
parameter groups."""

import itertools

import pytest

from zerobook.train.models import GPT, GPTConfig
from zerobook.train.capstone_train import learning_rate
from zerobook.runs.capstone import optimizer_for


def test_warm_up_then_cosine_down_to_the_floor():
    lr = [learning_rate(s, peak=1.0, warmup=10, steps=110) for s in range(111)]
    assert lr[0] == pytest.approx(0.1) and lr[9] == pytest.approx(1.0)  # linear warm-up
    assert lr[10] == pytest.approx(1.0) and lr[60] == pytest.approx(
        0.55
    )  # half-way: the mean
    assert lr[110] == pytest.approx(0.1)  # the floor, 0.1 x peak
    assert all(
        a >= b for a, b in itertools.pairwise(lr[10:])
    )  # never rises after the warm-up


def test_weight_decay_only_on_matrices():
    model = GPT(GPTConfig(vocab=32, hidden=16, layers=1, heads=2, seq_len=8))
    decay, rest = optimizer_for(model, lr=1e-3, weight_decay=0.1).param_groups
    assert decay["weight_decay"] == 0.1 and rest["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(
        p.dim() == 1 for p in rest["params"]
    )
    assert len(decay["params"]) + len(rest["params"]) == len(list(model.parameters()))
