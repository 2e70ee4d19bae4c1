"""zerobook.data_parallel.ddp's average in one process (a gloo group of one): one all-reduce of a flat buffer
gives each gradient exactly what one all-reduce per tensor gives."""

import pytest
import torch
import torch.distributed as dist

from zerobook.data_parallel.ddp import average_gradients
from zerobook.train.models import GPT, GPTConfig, next_token_loss


@pytest.fixture(scope="module")
def group_of_one():
    made = not dist.is_initialized()
    if made:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    if made:
        dist.destroy_process_group()


def gradients(flat: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab=32, hidden=16, layers=1, heads=2, seq_len=8))
    next_token_loss(model, torch.randint(0, 32, (2, 8))).backward()
    average_gradients(model, flat=flat)
    return [p.grad for p in model.parameters()]


def test_one_flat_all_reduce_gives_each_gradient_the_same_bits(group_of_one):
    assert all(
        torch.equal(a, b) for a, b in zip(gradients(flat=True), gradients(flat=False))
    )


def test_a_flat_buffer_refuses_two_dtypes(group_of_one):
    model = torch.nn.Sequential(
        torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).to(torch.bfloat16)
    )
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    with pytest.raises(ValueError, match="one dtype"):
        average_gradients(model, flat=True)
