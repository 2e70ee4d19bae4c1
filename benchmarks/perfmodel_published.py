"""The performance model against published measurements: nccl-tests' all-reduce bus
bandwidth on A100 and H100 clusters (8 to 1,984 GPUs) and FSDP training throughput (8 to
512 GPUs), each row with its source, its inputs, what was assumed, the prediction and
predicted / published (goal: busbw within 20%, throughput within 25%).

    python benchmarks/perfmodel_published.py --save benchmarks/results/perfmodel_published.md

Nothing is measured here: the rows are zerobook.perfmodel.published.ROWS. One row is
fitted (hardware.ELEMENTWISE_BYTES, refitted here and checked against the constant);
every other row is predicted.
"""

import argparse

from common import emit

from zerobook.accounting.hardware import ELEMENTWISE_BYTES
from zerobook.perfmodel.published import GOAL, fit_elementwise_bytes, predict_all


def report(rows: list[dict], fitted: float) -> str:
    unit = {"busbw": "GB/s (busbw)", "tokens": "tokens/s per GPU"}
    lines = [
        "# The performance model against published measurements",
        "",
        (
            f"Fitted on one row (marked): {fitted:.1f} bytes per hidden unit per token for a "
            f"block's non-matmul kernels (hardware.ELEMENTWISE_BYTES = {ELEMENTWISE_BYTES})."
        ),
        "",
        (
            "| row | GPUs | published | predicted | predicted / published | unit | source | "
            "assumed |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        quote = r["quote"].replace("|", "\\|")
        lines.append(
            f"| {r['id']} | {r['gpus']:,} | {r['published']:,} | "
            f"{r['predicted']:,.0f} | {r['ratio']:.2f} | {unit[r['kind']]} | "
            f'{r["where"]}: "{quote}" | {r["assumed"]} |'
        )
    misses = [r["id"] for r in rows if abs(r["ratio"] - 1) > GOAL[r["kind"]]]
    lines += ["", f"Outside the goal: {', '.join(misses) if misses else 'none'}."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--save", help="also write the report to this file (and .json)")
    cli = parser.parse_args()
    fitted = fit_elementwise_bytes()
    if round(fitted) != round(ELEMENTWISE_BYTES):
        raise SystemExit(
            f"the fit gives {fitted:.1f}, hardware.ELEMENTWISE_BYTES says "
            f"{ELEMENTWISE_BYTES}: update the constant"
        )
    rows = predict_all()
    emit(
        report(rows, fitted),
        cli.save,
        {"fitted_elementwise_bytes": fitted, "rows": rows},
    )


if __name__ == "__main__":
    main()
