"""qwZ's block quantizer (zerobook.zero.quantized): codes in [-127, 127], one scale per block,
every element within half a step of its value, and blocks of zeros kept exact."""

import pytest
import torch

from zerobook.zero.quantized import LEVELS, dequantize_blocks, quantize_blocks


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
