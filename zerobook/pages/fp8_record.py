"""What only a GPU host measured of FP8 (the newest zerobook.pages.gpu_record holding it): the FP8
matmul beside bf16's, and torchao's float8 training step beside bf16's, as the lines a page prints
and the speed-ups its prose states.

    print(fp8_record.lines())           # the measurements, or a line saying none was taken yet
    fp8_record.speedups(ao)             # {"eager": x, "compiled": x, "4096": x, ...}: bf16's step / FP8's
"""

from __future__ import annotations

from zerobook.pages import gpu_record

NOT_YET = "No GPU host has {what} for this book yet (make gpu-check does)."


def runs(ao: dict) -> dict:
    """The torchao section's runs by name: "eager", "compiled", then each wider hidden size."""
    return {"eager": ao["eager"], "compiled": ao["compiled"], **ao["wider"]}


def speedups(ao: dict) -> dict:
    """bf16's step time over FP8's, for each of `runs(ao)` (above 1: FP8 is faster)."""
    return {k: r["bf16"]["step_s"] / r["float8"]["step_s"] for k, r in runs(ao).items()}


def matmul_lines(record) -> list[str]:
    """The record's label, and the n x n x n FP8 matmul's rate against bf16's."""
    mm = record.section("fp8_matmul")
    rates = f"FP8 {mm['fp8'] / 1e12:.0f} TFLOP/s, bf16 {mm['bf16'] / 1e12:.0f}"
    speed = f"{mm['fp8'] / mm['bf16']:.2f} times as fast (n x n x n, n = {mm['n']})"
    return [record.label, f"{rates}: FP8 is {speed}"]


def torchao_lines(record, label: bool = True) -> list[str]:
    """The record's label (unless told), torchao's version, and a line per torchao run: its
    shape, both step times, the ratio."""
    ao = record.section("torchao")
    lines = [record.label] * label + [f"torchao {ao['torchao']}"]
    for run in runs(ao).values():
        c, bf16, fp8 = run["config"], run["bf16"]["step_s"], run["float8"]["step_s"]
        how = "compiled" if c["compile"] else "eager"
        shape = f"hidden {c['hidden']:>4}, {c['layers']} layers, {how:>8}"
        step = f"bf16 {bf16 * 1e3:5.1f} ms, FP8 {fp8 * 1e3:5.1f} ms a step"
        lines.append(f"{shape}: {step} ({bf16 / fp8:.2f}x)")
    return lines


def lines(latest=gpu_record.latest) -> str:
    """Both measurements from the newest records holding them, each or a line saying so."""
    mm, ao = latest(needs=("fp8_matmul",)), latest(needs=("torchao",))
    out = matmul_lines(mm) if mm else [NOT_YET.format(what="timed the FP8 matmul")]
    same = mm is not None and ao is not None and mm.path == ao.path
    out += torchao_lines(ao, not same) if ao else [NOT_YET.format(what="run torchao")]
    return "\n".join(out)
