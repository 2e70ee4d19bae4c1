"""What only a GPU can show, as the last `make gpu-check` on a GPU host recorded it
(benchmarks/results/gpu_<device>_<date>.json), for the chapters to show with its device and date.

    record = gpu_record.latest(needs=("memory",))  # None until a GPU check measured it
    record.label                          # "measured on NVIDIA H100 80GB HBM3 on 2026-11-23 (...)"
    record.section("memory")              # that section's results, or None if it failed

A chapter that reads it says plainly when no record exists (`MISSING`), rather than showing a
number from nowhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from zerobook.pages.saved import RESULTS  # the GPU records live among the saved results

MISSING = (
    "No GPU host has run `make gpu-check` for this book yet: there is no measurement to "
    "show here, only the CPU runs above."
)


@dataclass(frozen=True)
class GpuRecord:
    """One saved GPU check: its file and its results (the sections benchmarks/gpu.py writes)."""

    path: Path
    results: dict

    @property
    def device(self) -> str:
        return self.results["environment"]["device"]

    @property
    def date(self) -> str:
        return self.results["environment"]["date"]

    @property
    def label(self) -> str:
        env = self.results["environment"]
        return (
            f"measured on {self.device} on {self.date} (torch {env['torch']}, NCCL {env['nccl']}; "
            f"benchmarks/results/{self.path.name})"
        )

    def section(self, name: str):
        """A section's results; None if it was skipped or failed (its error is in the .md)."""
        value = self.results.get(name)
        if isinstance(value, str) or (isinstance(value, dict) and "traceback" in value):
            return None
        return value


def latest(results: Path = RESULTS, needs: tuple[str, ...] = ()) -> GpuRecord | None:
    """The newest GPU check in `results` (by the date it was taken) that holds every section
    named in `needs` (a check run with --sections holds only those), or None if none does."""
    records = []
    for path in results.glob("gpu_*.json"):
        data = json.loads(path.read_text())
        if not data.get("dry_run") and data.get("environment", {}).get("gpus"):
            record = GpuRecord(path, data)
            if all(record.section(name) is not None for name in needs):
                records.append(record)
    return max(records, key=lambda r: (r.date, r.path.name), default=None)


def allocator_rows(memory: dict, methods=None) -> list[dict]:
    """Per world size and method: the calculator's model states, the allocator's bytes at the
    moment they are all alive, their ratio, and the step's peak above them (bytes)."""
    rows = []
    for n, report in memory.items():
        for method, m in report["methods"].items():
            if methods and method not in methods:
                continue
            calc, cuda = m["calculator"]["total"], m["cuda"]
            rows.append(
                dict(
                    world_size=int(n),
                    method=method,
                    num_params=m["num_params"],
                    calculator=calc,
                    allocator=cuda["states"],
                    ratio=cuda["states"] / calc,
                    above=cuda["peak"] - cuda["states"],
                )
            )
    return rows


def capstone_prediction(run: dict) -> float:
    """Tokens/s the performance model predicts for the capstone's GPU run `run` (its config)
    on one GPU of the H100 preset: DDP, world size 1 (zerobook.perfmodel.predict_step)."""
    from zerobook.accounting.hardware import H100_NODE
    from zerobook.train.models import GPTConfig
    from zerobook.perfmodel import predict_step
    from zerobook.perfmodel.models import course_gpt

    c = run["config"]
    config = GPTConfig(vocab=256, hidden=c["hidden"], layers=c["layers"],
                       heads=c["heads"], seq_len=c["seq_len"])  # fmt: skip
    spec = course_gpt(config)
    return predict_step(spec, H100_NODE, world_size=1, gpus_per_node=1, stage=0,
                        micro_batch=c["batch"], seq_len=c["seq_len"]).tokens_per_second  # fmt: skip


def capstone_rows(section: dict) -> list[dict]:
    """Each method of a record's capstone section: tokens/s measured, and predicted (H100
    only: the preset is an H100's), MFU against the bf16 dense datasheet peak (a bound, not
    a prediction), held-out bits per byte against the baselines."""
    from zerobook.accounting.hardware import H100_SXM

    rows = []
    for method, run in section.items():
        measured = run["tokens_per_second"]
        h100 = "H100" in run.get("device_name", "")
        predicted = capstone_prediction(run) if h100 else None
        rows.append({
            "method": method, "parameters": run["num_params"], "tokens/s": measured,
            "predicted": predicted, "ratio": measured / predicted if predicted else None,
            "mfu": measured * run["flops_per_token"] / H100_SXM["bf16_dense"] if h100 else None,
            "held_out": run["evals"][-1][1], "bigram": run["baselines"]["2"],
            "seconds": run["seconds"],
        })  # fmt: skip
    return rows
