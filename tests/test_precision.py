"""zerobook.train.precision: AdamW holds 16 bytes per parameter in fp32 and in mixed precision (2 + 2 +
12), counted on the real tensors, and the mixed-precision step is AdamW's on the master weights."""

import torch

from zerobook.train import measure
from zerobook.train.models import GPT, GPTConfig, random_batch
from zerobook.train.precision import MixedPrecisionAdamW

CONFIG = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)
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
    assert (
        held.optimizer == 8 * psi + STEP_COUNTER_BYTES * tensors
    )  # momentum, variance, a step each


def test_mixed_precision_adamw_holds_2_2_12_bytes_per_parameter():
    model = GPT(CONFIG).to(torch.bfloat16)
    optimizer = MixedPrecisionAdamW(model.parameters())
    one_step(model, optimizer)
    psi, tensors = measure.num_params(model), len(list(model.parameters()))
    held = measure.model_state_bytes(model, optimizer)
    assert (held.params, held.grads) == (2 * psi, 2 * psi)
    assert (
        held.optimizer == 12 * psi + STEP_COUNTER_BYTES * tensors
    )  # fp32 master, momentum, variance
    assert all(
        m.grad is None for m in optimizer.master
    )  # no fp32 gradients kept after the step


def test_mixed_precision_step_matches_fp32_adamw_on_the_master_weights():
    torch.manual_seed(0)
    reference = GPT(CONFIG)
    model = GPT(CONFIG).to(torch.bfloat16)
    model.load_state_dict(
        {k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()}
    )
    optimizer = MixedPrecisionAdamW(model.parameters(), lr=1e-2)
    master_before = [m.detach().clone() for m in optimizer.master]
    one_step(model, optimizer)
    for param, master, before in zip(
        model.parameters(), optimizer.master, master_before
    ):
        assert not torch.equal(master, before)  # the step moved the fp32 weights
        assert torch.equal(
            param, master.to(torch.bfloat16)
        )  # and the model holds their bf16 copy
