"""ZeRO++'s qwZ on our ZeRO-3: each unit's all-gather sends int8 weights, block by block.

    zero = Zero3AdamW(model, unit_types=(Block,), unit_cls=quantized_unit(block=256))

Block quantization (symmetric, as DeepSpeed's CUDAQuantizer with 8 bits): the shard is cut into
blocks of `block` elements (the last one zero-padded); each block keeps one fp32 scale, its
largest magnitude over 127, and its elements become round(x / scale), integers in [-127, 127].
Dequantizing multiplies back: the error of an element is at most half a step, scale / 2, that is
max|block| / 254. The all-gather then moves one byte an element (and 4 per block), where bf16
moves two: all_gather_into_tensor of the int8 shard, and of the scales.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from zerobook.zero.units import Unit

LEVELS = 127  # symmetric int8: -127..127


def quantize_blocks(
    values: torch.Tensor, block: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 codes, fp32 scales): `values` (1-D) in blocks of `block` elements, the last one
    zero-padded; a block of zeros gets scale 1 (its codes are zeros)."""
    padded = -(-values.numel() // block) * block
    blocks = torch.zeros(padded, dtype=torch.float32, device=values.device)
    blocks[: values.numel()] = values.float()
    blocks = blocks.view(-1, block)
    scales = blocks.abs().amax(dim=1) / LEVELS
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    codes = torch.round(blocks / scales[:, None]).clamp_(-LEVELS, LEVELS).to(torch.int8)
    return codes.view(-1), scales


def dequantize_blocks(codes: torch.Tensor, scales: torch.Tensor, numel: int, dtype):
    """The values the codes stand for: code x its block's scale, the first `numel`, in `dtype`."""
    blocks = codes.view(scales.numel(), -1).float() * scales[:, None]
    return blocks.view(-1)[:numel].to(dtype)


def quantized_unit(block: int = 256):
    """A Unit class whose all-gathers send the shard block-quantized (Zero3's `unit_cls`)."""

    class QuantizedUnit(Unit):
        def start_gather(self):
            """Quantize this rank's shard and start the two all-gathers: codes, then scales."""
            if self.gathered or self.pending is not None:
                return
            codes, scales = quantize_blocks(self.shard, block)
            n = dist.get_world_size(self.group)
            all_codes = codes.new_empty(codes.numel() * n)
            all_scales = scales.new_empty(scales.numel() * n)
            self.gathers += 1
            self.pending = (
                dist.all_gather_into_tensor(all_codes, codes, group=self.group, async_op=True),
                dist.all_gather_into_tensor(all_scales, scales, group=self.group, async_op=True),
                all_codes,
                all_scales,
            )  # fmt: skip

        def wait_gather(self) -> None:
            """Wait for both, then dequantize each rank's piece into the full buffer."""
            self.start_gather()
            if self.pending is None:
                return
            codes_work, scales_work, codes, scales = self.pending
            codes_work.wait()
            scales_work.wait()
            self.pending = None
            self.flat.flat.untyped_storage().resize_(self.full_bytes)
            pieces = self.flat.flat.view(dist.get_world_size(self.group), -1)
            per_rank = scales.numel() // pieces.shape[0]
            for rank, piece in enumerate(pieces):
                blocks = slice(rank * per_rank, (rank + 1) * per_rank)
                piece.copy_(dequantize_blocks(codes.view(pieces.shape[0], -1)[rank],
                                              scales[blocks], piece.numel(), piece.dtype))  # fmt: skip

    QuantizedUnit.__name__ = f"QuantizedUnit(block={block})"
    return QuantizedUnit


def cost(elements: int = 2**22, block: int = 256, device: str = "cpu", repeats=5):
    """Seconds per element to quantize a bf16 tensor of `elements` in blocks of `block`, and to
    dequantize it back: the fastest of `repeats` timings of each (on a GPU, between CUDA
    synchronizations: the kernels' time)."""
    import time

    values = torch.randn(elements, device=device).to(torch.bfloat16)
    codes, scales = quantize_blocks(values, block)
    work = {
        "quantize": lambda: quantize_blocks(values, block),
        "dequantize": lambda: dequantize_blocks(
            codes, scales, elements, torch.bfloat16
        ),
    }
    sync = torch.cuda.synchronize if values.is_cuda else (lambda: None)
    best = {}
    for name, fn in work.items():
        fn()  # the first call pays for allocation
        times = []
        for _ in range(repeats):
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        best[name] = min(times) / elements
    return best


def break_even_bandwidth(per_element: dict, world_size: int, block: int = 256) -> float:
    """Bytes per second of the link below which qwZ's gather ends sooner than bf16's: each
    rank receives (N-1)/N of a unit, one byte and 4/block an element fewer than bf16's two,
    and pays for quantizing its 1/N shard and dequantizing the whole unit (per element)."""
    saved = (world_size - 1) / world_size * (2 - (1 + 4 / block))
    spent = per_element["quantize"] / world_size + per_element["dequantize"]
    return saved / spent
