"""Tables of what the later chapters' runs measured, built from their reports: ZeRO-3's prefetch
settings, recomputation under ZeRO-3, CPU offload's bytes. Notebook side; the cells pass the
reports in and show the table (zerobook.figures.widgets.html_table).

    peak = {name: blocks_at_peak(events[name], root, block) for name in runs}
    prefetch_table(runs, peak, skipped, caption="2 ranks")
"""

from __future__ import annotations

from zerobook.accounting import memory
from zerobook.figures.widgets import HTML, html_table


def root_and_block(unit_bytes: dict) -> tuple[int, int]:
    """(bytes of the root unit, bytes of the largest block) from a run's `unit_bytes`."""
    blocks = [v for k, v in unit_bytes.items() if k != "root"]
    return unit_bytes["root"], max(blocks)


def blocks_at_peak(events: list, root: int, block: int) -> tuple[int, int]:
    """Blocks allocated at the peak (besides the root) in forward, and in backward."""
    from zerobook.zero import timeline  # torch comes with it: only when asked

    split = timeline.index(events, "gather (backward)", "root")
    return tuple(
        (timeline.peak(part) - root) // block
        for part in (events[:split], events[split:])
    )


def prefetch_table(runs: dict, peak: dict, skipped: dict, caption: str) -> HTML:
    """One row per prefetch setting: weights against no prefetch, blocks at the peaks,
    prefetches skipped, the median step."""
    rows = [
        (
            name,
            f"{run['diff']:.0e}",
            *peak[name],
            skipped[name],
            f"{run['seconds'] * 1e3:.1f}",
        )
        for name, run in runs.items()
    ]
    headers = [
        "setting",
        "max |w - w_none|",
        "blocks at the forward peak",
        "blocks at the backward peak",
        "prefetches skipped",
        "median step (ms)",
    ]
    return html_table(headers, rows, caption=caption)


def first_block(counts: dict):
    """A per-unit count's value for the first block ("—" where the run counted none)."""
    return next((v for k, v in counts.items() if k.startswith("blocks.0")), "—")


def traffic_ratios(runs: dict) -> dict:
    """Bytes each configuration sent in its last step, over plain ZeRO-3's."""
    plain = sum(runs["plain"]["sent"].values())
    return {n: sum(r["sent"].values()) / plain for n, r in runs.items() if "sent" in r}


def recompute_table(runs: dict, traffic: dict, caption: str) -> HTML:
    """One row per configuration of zerobook.runs.zero3_recompute: a block's all-gathers and
    completed forwards, the traffic, the weights against plain ZeRO-3 (or the error)."""
    rows = [
        (
            n,
            first_block(r["gathers"]),
            first_block(r["forwards"]),
            f"{traffic[n]:.3f}",
            f"{r['diff']:.0e}",
        )
        if "error" not in r
        else (n, "—", "—", "—", "failed: " + r["error"][:70] + "…")
        for n, r in runs.items()
    ]
    headers = [
        "configuration",
        "all-gathers of a block",
        "forwards of a block run to the end",
        "traffic / plain ZeRO-3",
        "max |w - w_plain|",
    ]
    return html_table(headers, rows, caption=caption)


def offload_split_table(states: dict) -> HTML:
    """ZeRO-3's model states per GPU, and where offload puts them: {(Ψ, N): ModelStates}."""
    rows = []
    for (psi, n), s in states.items():
        device, host = s.params + s.grads, s.optimizer
        rows.append(
            (f"{psi / 1e9:g}B", n)
            + tuple(f"{b / memory.GB:.2f}" for b in (s.total, device, host))
            + (f"{8 * host / memory.GB:.0f}",)
        )
    headers = [
        "Ψ",
        "N",
        "ZeRO-3, GB per GPU",
        "with offload: GB per GPU",
        "host GB per GPU",
        "host GB per 8-GPU node",
    ]
    return html_table(headers, rows, caption="model states only (zb.accounting.memory)")


KEPT_ON_GPU = {  # what each system keeps on the GPU between steps, with optimizer offload
    'ours: Zero3AdamW(offload="cpu")': "16-bit weight and gradient shards",
    "DeepSpeed ZeRO-3 + offload_optimizer": "16-bit weight shards, room for the largest layer",
    "DeepSpeed ZeRO-3 + offload_optimizer + offload_param": "room for the largest layer",
    "FSDP2 + CPUOffloadPolicy": "nothing: units only while gathered",
}


def offload_systems_table(on_gpu: dict, caption: str) -> HTML:
    """Model states on each GPU between steps, system by system: {system: bytes}."""
    rows = [(s, KEPT_ON_GPU[s], f"{b / memory.GB:.2f}") for s, b in on_gpu.items()]
    return html_table(
        ["system", "model states on each GPU between steps", "GB per GPU"],
        rows,
        caption=caption,
    )


def offload_parity_table(runs: dict, caption: str) -> HTML:
    """Each method's weights against DDP's, and the bytes it keeps beside the model and in
    the host's memory: {method label: the parity run's record}."""
    rows = [
        (
            label,
            f"{r['diff']:.1e}",
            f"{r['resident_bytes']:,}",
            f"{r['offloaded_bytes']:,}",
        )
        for label, r in runs.items()
    ]
    headers = [
        "method",
        "max |w - w_DDP|",
        "bytes beside the model (16-bit shards)",
        "bytes of master and AdamW state",
    ]
    return html_table(headers, rows, caption=caption)
