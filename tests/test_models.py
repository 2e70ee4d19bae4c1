"""zerobook.train.models: the course's small GPT, counted exactly."""

from zerobook.train import measure
from zerobook.accounting import activations
from zerobook.train.models import GPT, GPTConfig

CONFIG = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)


def test_the_model_has_exactly_the_formulas_parameters():
    model = GPT(CONFIG)
    assert measure.num_params(model) == activations.transformer_params(
        CONFIG.hidden, CONFIG.layers, CONFIG.vocab
    )
    # the output layer is the embedding: tied, counted once
    assert sum(p.numel() for p in model.parameters()) == measure.num_params(model)
