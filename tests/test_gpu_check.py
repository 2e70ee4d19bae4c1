"""make gpu-check (benchmarks/gpu.py) without a GPU: its dry run takes every section's CPU path
and says it is one; the live-tensor count of zerobook.runs.cuda_memory against the calculator;
and how chapters find the latest GPU record (zerobook.pages.gpu_record)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from zerobook.pages import gpu_record
from zerobook.train.models import GPT, GPTConfig


@pytest.mark.launch
def test_the_dry_run_takes_every_section_and_counts_model_states_as_the_calculator(
    tmp_path,
):
    save = tmp_path / "dry.md"
    subprocess.run(
        [sys.executable, "benchmarks/gpu.py", "--dry-run", "--save", str(save)],
        cwd=ROOT,
        check=True,
        timeout=300,
        capture_output=True,
    )
    text, results = save.read_text(), json.loads(save.with_suffix(".json").read_text())
    assert "**Dry run**" in text and "no GPU" in text
    assert all(f"## {n}." in text for n in range(1, 15))
    assert results["quantize"]["break_even"] > 0  # the zeropp chapter's GPU number
    assert results["offload"]["2"]["parity"] == {
        "resident": 0.0,
        "offload": 0.0,
        "prefetch": 0.0,
    }
    assert (
        results["capstone"]["fsdp2"]["curve"] == results["capstone"]["single"]["curve"]
    )
    assert results["runs"]["hello"]["gloo-cpu"]["ok"]
    # the allocator's expandable segments: the same methods, the ranks' environment set
    assert (
        results["memory_expandable"]["2"]["methods"].keys()
        == results["memory"]["2"]["methods"].keys()
    )
    assert results["labs"]["setup_check/all_reduce"]["gloo-cpu"]["ok"]
    assert (
        gpu_record.latest(tmp_path) is None
    )  # a dry run is never shown as a GPU measurement

    report = results["memory"]["2"]
    n, tensors = (
        report["world_size"],
        len(list(GPT(GPTConfig(vocab=512, hidden=64, layers=2, heads=1)).parameters())),
    )
    # Above the calculator only: padding to N equal shards (< N elements of 16 bytes per bucket or
    # unit, at most one per parameter tensor) and AdamW's step counters (4 bytes per tensor it steps).
    slack = 16 * (n - 1) * tensors + 4 * tensors
    for method, m in report["methods"].items():
        calc, live = m["calculator"], m["live"]
        terms = (
            ("params", "grads")
            if method.endswith("offload")
            else ("params", "grads", "optimizer")
        )
        assert all(0 <= live[t] - calc[t] for t in terms), method
        assert sum(live[t] - calc[t] for t in terms) <= slack, method
        if m["stage"] == 0:
            assert live["params"] == calc["params"] and live["grads"] == calc["grads"]


def write_record(
    folder, name: str, date: str, gpus: int = 1, dry_run: bool = False
) -> None:
    env = {"date": date, "gpus": gpus, "device": "GPU X", "torch": "2.x", "nccl": "2.x"}
    (folder / name).write_text(
        json.dumps(
            {"environment": env, "dry_run": dry_run, "matmul": "skipped: no GPU"}
        )
    )


def test_chapters_read_the_newest_gpu_record_and_nothing_else(tmp_path):
    assert gpu_record.latest(tmp_path) is None
    write_record(
        tmp_path, "gpu_cpu_2030-01-01.json", "2030-01-01", gpus=0, dry_run=True
    )
    assert gpu_record.latest(tmp_path) is None
    write_record(tmp_path, "gpu_x_2026-01-02.json", "2026-01-02")
    write_record(tmp_path, "gpu_y_2026-03-01.json", "2026-03-01")
    record = gpu_record.latest(tmp_path)
    assert (
        record.path.name == "gpu_y_2026-03-01.json"
        and "GPU X on 2026-03-01" in record.label
    )
    assert record.section("matmul") is None  # skipped: nothing to show


def test_a_chapter_reads_the_newest_record_that_measured_its_section(tmp_path):
    """A later check of some sections only (--sections) does not hide an earlier one's."""
    write_record(tmp_path, "gpu_x_2026-01-02.json", "2026-01-02")
    older = tmp_path / "gpu_x_2026-01-02.json"
    older.write_text(
        json.dumps(dict(json.loads(older.read_text()), matmul={"bf16": 1}))
    )
    write_record(tmp_path, "gpu_y_2026-03-01.json", "2026-03-01")
    assert gpu_record.latest(tmp_path).path.name == "gpu_y_2026-03-01.json"
    assert gpu_record.latest(tmp_path, needs=("matmul",)).path == older
    assert gpu_record.latest(tmp_path, needs=("matmul", "memory")) is None


def test_the_gpu_check_runs_every_run_or_says_where_it_runs_instead():
    """A run added to zerobook/runs is checked on a GPU host too: benchmarks/gpu_paths.RUNS runs
    it, or ELSEWHERE names the section (or the reason) that takes it instead."""
    gpu_paths = benchmark("gpu_paths")
    runs = {p.stem for p in (ROOT / "zerobook" / "runs").glob("*.py")} - {"__init__"}
    assert not set(gpu_paths.RUNS) & set(gpu_paths.ELSEWHERE)
    assert set(gpu_paths.RUNS) | set(gpu_paths.ELSEWHERE) == runs, (
        "gpu_paths.RUNS misses",
        runs - set(gpu_paths.RUNS) - set(gpu_paths.ELSEWHERE),
    )


def test_a_check_merged_across_days_names_its_first_and_last_day():
    merged_date = benchmark("gpu").merged_date
    assert merged_date(None, "2026-11-30") == "2026-11-30"
    assert merged_date("2026-11-30", "2026-11-30") == "2026-11-30"
    assert merged_date("2026-11-29", "2026-11-30") == "2026-11-29 to 2026-11-30"
    span = "2026-11-29 to 2026-11-30"
    assert merged_date(span, "2026-11-30") == span
    assert merged_date(span, "2026-12-02") == "2026-11-29 to 2026-12-02"


def benchmark(name: str):
    """benchmarks/<name>.py as a module (its siblings importable as it imports them)."""
    import importlib

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
