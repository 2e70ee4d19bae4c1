"""qwZ's block quantizer (zerobook.zero.quantized): codes in [-127, 127], one scale per block,
every element within half a step of its value, and blocks of zeros kept exact."""

import pytest
import torch

from zerobook.zero.quantized import (
    LEVELS,
    break_even_bandwidth,
    cost,
    dequantize_blocks,
    quantize_blocks,
)


@pytest.mark.parametrize("block", [1, 7, 256, 4096])
def test_every_element_is_within_half_a_step_of_its_block(block):
    torch.manual_seed(0)
    values = torch.randn(10_001) * torch.logspace(-3, 1, 10_001)  # magnitudes that vary
    codes, scales = quantize_blocks(values.to(torch.bfloat16), block)
    assert codes.dtype == torch.int8 and codes.abs().max() <= LEVELS
    assert scales.numel() == -(-values.numel() // block)  # the last block zero-padded
    back = dequantize_blocks(codes, scales, values.numel(), torch.float32)
    exact = values.to(torch.bfloat16).float()
    half_step = (scales / 2).repeat_interleave(block)[: values.numel()]
    assert ((back - exact).abs() <= half_step * (1 + 4 * LEVELS * 2**-24)).all()


def test_a_block_of_zeros_stays_zero_and_the_largest_element_is_exact():
    values = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.5, -0.25, 0.125, 0.0])
    codes, scales = quantize_blocks(values, 4)
    assert codes[:4].tolist() == [0, 0, 0, 0] and scales[0] == 1
    back = dequantize_blocks(codes, scales, 8, torch.float32)
    assert (
        back[:4].tolist() == [0, 0, 0, 0] and back[4] == 0.5
    )  # the max: code 127 exactly


def test_the_break_even_link_is_the_bytes_saved_over_the_work_per_element():
    """Each rank receives (N-1)/N of a unit, one byte and 4/block an element fewer than bf16's
    two; it quantizes its 1/N and dequantizes the whole unit. Timed on a small tensor here."""
    per_element = cost(elements=4096, block=256, repeats=1)
    assert set(per_element) == {"quantize", "dequantize"}
    assert all(0 < s < 1e-3 for s in per_element.values())
    n, q, d = 8, 3e-9, 1e-9
    link = break_even_bandwidth({"quantize": q, "dequantize": d}, world_size=n)
    saved_s = (
        (n - 1) / n * (2 - 1 - 4 / 256) / link
    )  # at that speed, the saved bytes' time
    assert saved_s == pytest.approx(q / n + d)  # equals the work's
