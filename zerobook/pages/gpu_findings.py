"""What the memory chapter says about a GPU, from the newest GPU record (`gpu_record`) or from the
GPU in this machine, as sentences that say plainly when nothing was measured.

    extra = overheads(record.section("memory"))   # [(N, method, reserved/allocated - 1), ...]
    fragmentation_sentence(record, extra)          # "Measured on a GPU (...): 2.1% to 9.8% ..."
    bf16_matmul_flops()                            # FLOP/s of an 8192³ bf16 product here, or None
    matmul_sentence(record)                        # the record's product against the datasheet
"""

from __future__ import annotations

from zerobook.accounting import hardware
from zerobook.pages import gpu_record


def overheads(section: dict | None) -> list[tuple[int, str, float]]:
    """(N, method, reserved_peak / allocated_peak - 1) for every method of a memory section that
    recorded the caching allocator's peaks: what fragmentation costs at the step's peak."""
    return [
        (int(n), method, m["cuda"]["reserved_peak"] / m["cuda"]["allocated_peak"] - 1)
        for n, report in (section or {}).items()
        for method, m in report["methods"].items()
        if (m.get("cuda") or {}).get("reserved_peak")
    ]


def fragmentation_sentence(record, extra: list[tuple[int, str, float]]) -> str:
    """The range of `extra` as measured on `record`'s GPU, or why there is none; then the same
    with `expandable_segments:True`, from the newest record that measured it."""
    if extra:
        low, high = min(e[2] for e in extra), max(e[2] for e in extra)
        sentence = (
            f"Measured on a GPU ({record.label}): the allocator reserved {low:.1%} to "
            f"{high:.1%} more than it allocated at the step's peak."
        )
    else:
        why = (
            f"the GPU record ({record.label}) predates this reading"
            if record
            else "no GPU record"
        )
        sentence = f"Not measured yet: {why}; `make gpu-check` on a GPU host adds it."
    expandable = gpu_record.latest(needs=("memory_expandable",))
    grown = [
        e[2] for e in overheads(expandable and expandable.section("memory_expandable"))
    ]
    if grown:  # the same methods with segments that grow in place
        return sentence + (
            f" With expandable_segments:True ({expandable.label}): {min(grown):.1%} to "
            f"{max(grown):.1%}."
        )
    return sentence + (
        " With expandable_segments:True: not measured yet (the next"
        " `make gpu-check` on a GPU host records it)."
    )


def bf16_matmul_flops(size: int = 8192, repeats: int = 20) -> float | None:
    """FLOP/s of `repeats` bf16 products of two size x size matrices on this machine's GPU, timed
    with CUDA events; None without a GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    x = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        x @ x
    end.record()
    torch.cuda.synchronize()
    return repeats * 2 * size**3 / (start.elapsed_time(end) / 1e3)


def matmul_sentence(record) -> str:
    """The record's 8192³ bf16 product against its datasheet's dense peak and the "4000 TFLOPS"
    of FP8 with sparsity; `gpu_record.MISSING` without a record."""
    matmul = record.section("matmul") if record else None
    if not matmul:
        return gpu_record.MISSING
    sheet = hardware.datasheet(record.device)  # an H200: the H100's chip, same figures
    return (
        f"Measured, not only read off the datasheet ({record.label}): an 8192³ BF16 "
        f"product ran at {matmul['bf16'] / 1e12:.0f} TFLOP/s, "
        f"{matmul['bf16'] / sheet['bf16_dense']:.2f} of the dense "
        f'figure and {matmul["bf16"] / 4000e12:.2f} of the "4000".'
    )
