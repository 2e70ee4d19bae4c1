"""The tables of "Moving T*" (chapters/zero_pays_further): the bytes each way of accumulating
gradients sent in a run here, and T* with ZeRO++'s parts. Notebook side.

    ways = zerobook.torchrun("zerobook.runs.accumulation", nproc=3).ranks[0]["ways"]
    accumulation_table(ways)
    zeropp_table(zeropp_t_star(H100_NODE), fused=zeropp_t_star(H100_NODE, quantizer="fused"))
"""

from __future__ import annotations

from zerobook.figures.widgets import html_table
from zerobook.perfmodel import critical_tokens_per_gpu

# zerobook.runs.accumulation's ways: (label, stage, grad_sync: None for the stage's default)
WAYS = {
    "ddp": ("DDP, no_sync", 0, None),
    "zero1": ("stage 1", 1, None),
    "zero2": ("stage 2", 2, None),
    "zero2_no_sync": ("stage 2, no_sync", 2, "last"),
    "zero3": ("stage 3 (ours)", 3, None),
    "fsdp2": ("FSDP2", 3, "every"),
    "fsdp2_no_sync": ("FSDP2, sync on the last only", 3, "last"),
}
MICRO_BATCHES = (1, 2, 4)
ZEROPP_PARTS = {
    "ZeRO-3": (),
    "qwZ": ("qwZ",),
    "hpZ": ("hpZ",),
    "qgZ": ("qgZ",),
    "hpZ + qgZ": ("hpZ", "qgZ"),
    "all three": ("qwZ", "hpZ", "qgZ"),
}


def in_psi(ways: dict, way: str, k: int) -> tuple[float, float]:
    """(all-gathered, reduced) elements of a step of `k` micro-batches, in units of the way's
    Psi (N-1)/N: a run's reduced count at k = 1 is 1.5 of them (fp32 counted as two halves)."""
    run = ways[way][str(k)]
    unit = run["reduced"] * 2 / 3
    sent = run["sent"]
    reduced = sent.get("reduce_scatter_tensor", 0) + sent.get("all_reduce", 0)
    return sent.get("all_gather_into_tensor", 0) / unit, reduced / unit


def sent_text(ways: dict, way: str, k: int) -> str:
    """ "gathered + reduced", two decimals each."""
    return " + ".join(f"{x:.2f}" for x in in_psi(ways, way, k))


def accumulation_table(ways: dict, world_size: int = 3):
    """HTML: what each way sent per step at each number of micro-batches (measured)."""
    rows = [
        (label, *(sent_text(ways, way, k) for k in MICRO_BATCHES))
        for way, (label, _, _) in WAYS.items()
    ]
    return html_table(
        ["way", *(f"k = {k}" for k in MICRO_BATCHES)],
        rows,
        caption=f"sent per step, gathered + reduced, in Psi (N-1)/N, N = {world_size} "
        "(measured)",
    )


def zeropp_t_star(hardware, world_size: int = 64, quantizer: str = "unfused") -> dict:
    """(part, NICs per node) -> T* of ZeRO-3 with ZeRO++'s part, on `hardware`'s nodes with
    all their NICs and with one; qwZ's passes priced by `quantizer` (zeropp.QUANTIZERS: the
    measured "unfused", DeepSpeed's "fused" kernels as a bound, or "none")."""
    one_nic = hardware.with_(nics_per_node=1)
    return {
        (name, hw.nics_per_node): critical_tokens_per_gpu(
            hw,
            world_size=world_size,
            gpus_per_node=8,
            zeropp=parts,
            quantizer=quantizer,
        )
        for name, parts in ZEROPP_PARTS.items()
        for hw in (hardware, one_nic)
    }


def zeropp_table(stars: dict, label: str = "64 H100s", fused: dict | None = None):
    """HTML: `zeropp_t_star`'s T*, a row per part, a column per NIC count (and, given `fused`,
    the same with DeepSpeed's fused quantizer, a bound, beside each)."""
    nics = sorted({k for _, k in stars}, reverse=True)
    ways = [("", stars)] + ([(", fused (bound)", fused)] if fused else [])
    headers = [label] + [
        f"{k} NIC{'s' if k > 1 else ''} a node{tag}" for k in nics for tag, _ in ways
    ]
    rows = [
        (name, *(f"{t[name, k]:,.0f}" for k in nics for _, t in ways))
        for name in ZEROPP_PARTS
    ]
    caption = (
        "T*, tokens per GPU per step, with ZeRO++'s parts (qwZ's passes as measured"
    )
    return html_table(
        headers, rows, caption=caption + (", and fused: a bound)" if fused else ")")
    )


def wait_before_step(prediction) -> tuple:
    """(seconds the optimizer step waits after the last backward, the span it waits for): the
    last collective to end before a predicted step's optimizer starts."""
    computed = [s for s in prediction.timeline if s.stream == "compute"]
    step = next(s for s in computed if s.what == "optimizer step")
    ends = max(s.end for s in computed if s.what == "backward")
    before = [
        s
        for s in prediction.timeline
        if s.stream != "compute" and s.end <= step.start + 1e-12
    ]
    return step.start - ends, max(before, key=lambda s: s.end)
