"""The cases and tables of "When ZeRO pays" and its sequel (chapters/when_zero_pays,
chapters/zero_pays_further): `predict_step`'s arguments for the cases the pages compare, and the
HTML tables built from its predictions, so that a page's cell keeps only the model, the stage and
the result. Notebook side.

    t_star(H100_NODE, 64)                        # T*, the shard group's layout filled in
    stages = predict_stages([Case(LLAMA3_8B, 8, 8192, "matmul_inputs")], H100_NODE)
    stage_table(stages)                          # each stage's step, MFU and memory
    fastest_that_fits(stages)                    # model name -> (stage, Prediction)
    lowest_fitting(case, H100_NODE, margin=0.3, logit_bytes=4)   # "How sure is fits?"
"""

from __future__ import annotations

from dataclasses import dataclass

from zerobook.figures.widgets import html_table
from zerobook.perfmodel import critical_tokens_per_gpu, peak_memory, predict_step

GPUS_PER_NODE = 8  # the DGX-style nodes of every case
# Stages 1-2 all-gather the updated weights after the optimizer step (DeepSpeed's ZeRO-1/2,
# ours) or block by block ahead of the next forward (Megatron's distributed optimizer).
SCHEDULES = (
    (0, "after_step"),
    (1, "after_step"),
    (1, "next_forward"),
    (2, "after_step"),
    (2, "next_forward"),
    (3, "after_step"),
)


@dataclass(frozen=True)
class Case:
    """A model on `world_size` GPUs, one sequence of `seq_len` tokens per GPU, recomputing as
    `checkpointing` says (predict_step's activation_checkpointing)."""

    model: object
    world_size: int
    seq_len: int
    checkpointing: str


def t_star(hardware, world_size: int, shard_group: int | None = None, **options):
    """critical_tokens_per_gpu over `world_size` GPUs in nodes of up to eight."""
    return critical_tokens_per_gpu(
        hardware,
        world_size=world_size,
        gpus_per_node=min(world_size, GPUS_PER_NODE),
        shard_group=shard_group,
        **options,
    )


def predict_case(case: Case, hardware, stage: int, **options):
    """predict_step for `case` under `stage` (a step that does not fit says so: allow_oom)."""
    return predict_step(
        case.model,
        hardware,
        world_size=case.world_size,
        gpus_per_node=GPUS_PER_NODE,
        stage=stage,
        micro_batch=1,
        seq_len=case.seq_len,
        activation_checkpointing=case.checkpointing,
        allow_oom=True,
        **options,
    )


def predict_stages(cases, hardware) -> dict:
    """(case, stage, param_gather) -> Prediction, for every schedule of SCHEDULES."""
    return {
        (case, stage, gather): predict_case(case, hardware, stage, param_gather=gather)
        for case in cases
        for stage, gather in SCHEDULES
    }


def fastest_that_fits(stages: dict) -> dict:
    """Model name -> (stage, Prediction): the fastest step that fits, the lowest stage among
    equals (SCHEDULES runs from stage 0 up)."""
    best = {}
    for (case, stage, _), p in stages.items():
        name = case.model.name
        if p.fits and (name not in best or p.step_s < best[name][1].step_s):
            best[name] = (stage, p)
    return best


def stage_table(stages: dict, caption: str = "predict_step on H100 nodes"):
    """HTML: each case and stage's predicted memory, step and MFU ("does not fit" past 80 GB)."""
    rows = [
        (
            case.model.name,
            case.world_size,
            case.checkpointing,
            f"{stage}, gather ahead" if gather == "next_forward" else stage,
            f"{p.peak_memory_bytes / 1e9:.0f}",
            f"{p.step_s:.2f}" if p.fits else "does not fit",
            f"{p.mfu:.2f}" if p.fits else "",
        )
        for (case, stage, gather), p in stages.items()
    ]
    headers = ["model", "GPUs", "checkpointing", "stage", "GB per GPU", "step s", "MFU"]
    return html_table(headers, rows, caption=caption + " (predicted)")


def measured_overheads(memory_section) -> list[float]:
    """The allocator's overhead at the step's peak for each method and world size a GPU check
    measured (benchmarks/gpu.py's memory section): max_memory_reserved / max_memory_allocated
    - 1."""
    return [
        m["cuda"]["reserved_peak"] / m["cuda"]["allocated_peak"] - 1
        for report in memory_section.values()
        for m in report["methods"].values()
        if (m.get("cuda") or {}).get("reserved_peak")
    ]


def unmargined_bytes(case: Case, stage: int, logit_bytes: float) -> float:
    """The case's peak before the allocator's margin (perfmodel.peak_memory, as predict_step
    calls it for one micro-batch, prefetching, without ZeRO++)."""
    terms = peak_memory(
        case.model,
        stage,
        case.world_size,
        case.seq_len,
        case.checkpointing,
        True,
        margin=0.0,
        logit_bytes=logit_bytes,
    )
    return sum(terms.values())


def margin_limit(case: Case, hardware, stage: int, logit_bytes: float) -> float:
    """The largest allocator margin with which `stage` still fits the case."""
    return hardware.memory_bytes / unmargined_bytes(case, stage, logit_bytes) - 1


def lowest_fitting(case: Case, hardware, margin: float, logit_bytes: float):
    """The lowest stage that fits the case with this margin and loss (None: none fits): the
    fastest that fits where stages 1-2 gather ahead of the forward (Megatron's schedule)."""
    fitting = [
        s for s in range(4) if margin <= margin_limit(case, hardware, s, logit_bytes)
    ]
    return min(fitting, default=None)


def stage_grids(cases, hardware, margins, logit_bytes) -> dict:
    """Title -> the lowest stage that fits (lowest_fitting) for each of `logit_bytes` (rows)
    and `margins` (columns), for each case."""
    return {
        f"{c.model.name} on {c.world_size:,} GPUs: lowest stage that fits": [
            [lowest_fitting(c, hardware, m, b) for m in margins] for b in logit_bytes
        ]
        for c in cases
    }


def t_star_table(layouts, hardwares, here=None):
    """HTML: T* (and at the roofline) for each hardware and (label, world_size, shard_group);
    `here`: (label, Hardware, world_size) of a calibrated host, T* without a roofline."""
    rows = [
        (
            f"{hw.name.split(',')[0]}, {label}",
            f"{hw.peak_flops * hw.sustained / 1e12:.0f}",
            f"{t_star(hw, n, g):,.0f}",
            f"{t_star(hw.roofline(), n, g):,.0f}",
        )
        for hw in hardwares
        for label, n, g in layouts
    ]
    if here:
        label, hw, n = here
        rows.append(
            (label, f"{hw.peak_flops / 1e12:.3f}", f"{t_star(hw, n):,.0f}", "-")
        )
    headers = ["GPUs and layout", "F sustained TFLOP/s", "T*", "T* at the peak"]
    return html_table(headers, rows, caption="T*, tokens per GPU per step (predicted)")


def course_hardware(calibration):
    """The "this machine" preset of a saved calibration, for the course GPT of the CPU runs
    (benchmarks/perfmodel.py's: 4 sequences of 128 tokens per rank)."""
    from zerobook.perfmodel.machine import machine_hardware

    return machine_hardware(calibration, course_model(), batch=4, seq_len=128)


def course_model():
    """The performance model's spec of the benchmark's course GPT."""
    from zerobook.perfmodel.models import course_gpt
    from zerobook.train.models import GPTConfig

    config = GPTConfig(vocab=4096, hidden=256, layers=4, heads=4, seq_len=128)
    return course_gpt(config)
