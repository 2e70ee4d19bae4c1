"""gpu_report's tables of what the device computes and records: matrix-multiply FLOP/s against
the datasheet, the model's compute time, offload, the capstone, qwZ's quantization, NCCL's log and
flight recorder, the FP8 matmul and torchao's FP8 training."""

from zerobook.accounting.hardware import datasheet
from zerobook.pages import gpu_record
from gpu_report_host import TFLOPS, failed


def matmul(section, device: str) -> list[str]:
    lines = ["## 6. Dense matrix multiply against the datasheet", ""]
    if failed(section):
        return lines + failed(section)
    found = datasheet(device)
    keys = {"bf16": "bf16_dense", "tf32": "tf32_dense", "fp32": "fp32"}
    sheet = {dtype: found[key] for dtype, key in keys.items()} if found else {}
    lines += [
        f"{section['n']} x {section['n']} x {section['n']} products:",
        "",
        "| dtype | measured TFLOP/s | datasheet (SXM, dense) | measured / datasheet |",
        "| --- | --- | --- | --- |",
    ]
    for dtype in ("bf16", "tf32", "fp32"):
        got, ref = section[dtype], sheet.get(dtype)
        lines.append(
            f"| {dtype} | {got / TFLOPS:.1f} | {ref / TFLOPS if ref else '-'} | "
            f"{got / ref if ref else float('nan'):.2f} |"
        )
    if sheet:
        lines += [
            "",
            f'The "4000 TFLOPS" often quoted for the H100 (and the H200, the same chip) is its '
            f"FP8 figure *with 2:4 sparsity* ({found['fp8_sparse'] / TFLOPS:.1f}); dense BF16, "
            f"what training runs, is {found['bf16_dense'] / TFLOPS:.1f}, and this GPU measured {section['bf16'] / TFLOPS:.0f}: "
            f"{section['bf16'] / 4000e12:.2f} of the quoted 4000.",
        ]
    return lines + [""]


def compute_model(section, rates: dict) -> list[str]:
    lines = ["## 7. The performance model's compute time against a measured step", ""]
    if failed(section) or failed(rates):
        return lines + (failed(section) or failed(rates))
    lines += [
        "Forward + backward of the course GPT (fp32) on one GPU, against 3 x its forward FLOPs at "
        f"the measured fp32 rate ({rates['fp32'] / TFLOPS:.1f} TFLOP/s):",
        "",
        "| hidden | layers | sequences | GFLOP | predicted ms | measured ms | measured / predicted |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in section:
        predicted = r["flops"] / rates["fp32"]
        lines.append(
            f"| {r['hidden']} | {r['layers']} | {r['batch']} | {r['flops'] / 1e9:.1f} | {predicted * 1e3:.2f} | "
            f"{r['seconds'] * 1e3:.2f} | {r['seconds'] / predicted:.2f} |"
        )
    return lines + [""]


def offload(section) -> list[str]:
    lines = [
        "## 8. ZeRO-3 offload: each unit copied from pinned host memory, with and without prefetch",
        "",
    ]
    if failed(section):
        return lines + failed(section)
    lines += [
        "Forward + backward of the GPT (bf16, one unit per block, gradients copied back to pinned host "
        "memory); copies from the profiler trace of one step; `units peak` is the most bytes of "
        "device copies of units alive at once, from the CUDA allocator's record of that step.",
        "",
        "| sequences | config | step ms | / resident | H2D ms | H2D beside compute | units peak / unit |"
        "",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for batch, report in section.items():
        runs, unit = (
            report["runs"],
            None,
        )  # on a CPU (the dry run): no trace, no allocator record
        resident = runs["resident"]["seconds"]
        for name, run in runs.items():
            unit = unit or max(run["unit_bytes"].values(), default=None)
            k = run.get("kernels", {}).get("h2d")
            held = (
                max(run["memory"]["units"]) / unit if "memory" in run else float("nan")
            )
            lines.append(
                f"| {batch} | {name} | {run['seconds'] * 1e3:.1f} | {run['seconds'] / resident:.2f} | "
                f"{k['busy_us'] / 1e3:.1f} | {k['beside_compute_us'] / max(k['busy_us'], 1):.2f} | "
                f"{held:.2f} |"
                if k
                else f"| {batch} | {name} | {run['seconds'] * 1e3:.1f} | 1.00 | - | - | - |"
            )
    first = next(iter(section.values()))
    parity, rates = first.get("parity", {}), first.get("copy_rates")
    if rates:
        lines += [
            "",
            f"Pinned copies of 1 GiB: host to device {rates['h2d']:.1f} GB/s alone, device to host "
            f"{rates['d2h']:.1f} alone, {rates['both']:.1f} both directions at once.",
        ]
    lines += [
        "",
        "Gradients against `resident` (small GPT, deterministic kernels), largest difference: "
        + ", ".join(f"{name} {diff:g}" for name, diff in parity.items()),
    ]
    return lines + [""]


def capstone(section) -> list[str]:
    lines = [
        "## 9. The capstone's GPT on real text (the standard library's source), bf16, one GPU",
        "",
    ]
    if failed(section):
        return lines + failed(section)
    lines += [
        "The prediction: zerobook.perfmodel.predict_step for this GPT on one GPU of the H100 preset "
        "(sustained matmul rate and element-wise term as the preset says; DDP, world size 1).",
        "",
        "| method | parameters | tokens/s | predicted tokens/s | measured / predicted | "
        "MFU (bf16 dense datasheet) | held-out bits/byte | unigram | bigram | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in gpu_record.capstone_rows(section):
        predicted, ratio, mfu = row["predicted"], row["ratio"], row["mfu"]
        r = section[row["method"]]
        lines.append(
            f"| {row['method']} | {row['parameters']:,} | {row['tokens/s']:,.0f} | "
            f"{f'{predicted:,.0f}' if predicted else '-'} | "
            f"{f'{ratio:.2f}' if ratio else '-'} | {f'{mfu:.3f}' if mfu else '-'} | "
            f"{row['held_out']:.3f} | {r['baselines']['1']:.3f} | {row['bigram']:.3f} | "
            f"{row['seconds']:.0f} |"
        )
    method, r = next(
        ((m, r) for m, r in section.items() if r.get("sample")), (None, None)
    )
    if r:
        lines += [
            "",
            f"A sample from `{method}` ({r['config']['sample']} bytes after `def `, temperature 0.8):",
            "",
            "```",
            r["sample"],
            "```",
        ]
    return lines + [""]


def quantize(section) -> list[str]:
    lines = ["## 10. ZeRO++'s block quantization (qwZ) on the device", ""]
    if failed(section):
        return lines + failed(section)
    return lines + [
        f"A bf16 tensor of {section['elements']:,} elements, blocks of 256 "
        "(zerobook.zero.quantized, unfused: one PyTorch op a pass):",
        "",
        "| quantize (ns/element) | dequantize (ns/element) | break-even link, 8 ranks (GB/s) |",
        "| --- | --- | --- |",
        f"| {section['quantize'] * 1e9:.4f} | {section['dequantize'] * 1e9:.4f} | "
        f"{section['break_even'] / 1e9:,.1f} |",
        "",
    ]


def nccl_debug(section) -> list[str]:
    lines = ["## 11. NCCL_DEBUG=INFO of one all-reduce on every GPU", ""]
    if failed(section):
        return lines + failed(section)
    said = section["findings"] or ["nothing zerobook.launcher.nccl_log knows of"]
    return lines + [
        f"Ranks {section['ranks']}, Init COMPLETE from {section['complete']}; network "
        f"{section['network']}; links {section['links']}. Findings:",
        "",
        *[f"- {line}" for line in said],
        "",
        "```",
        section["text"].rstrip(),
        "```",
        "",
    ]


def fp8_matmul(section, device: str) -> list[str]:
    lines = ["## 12. FP8 matrix multiply (torch._scaled_mm) beside bf16", ""]
    if failed(section):
        return lines + failed(section)
    sheet = datasheet(device) or {}
    ref = sheet.get("fp8_dense")
    return lines + [
        f"{section['n']} x {section['n']} x {section['n']}, e4m3 inputs, one scale a tensor, "
        "bf16 out:",
        "",
        "| FP8 TFLOP/s | bf16 TFLOP/s | FP8 / bf16 | FP8 datasheet (dense) |",
        "| --- | --- | --- | --- |",
        f"| {section['fp8'] / TFLOPS:.1f} | {section['bf16'] / TFLOPS:.1f} | "
        f"{section['fp8'] / section['bf16']:.2f} | {ref / TFLOPS if ref else '-'} |",
        "",
    ]


def flight_recorder(section) -> list[str]:
    lines = ["## 13. NCCL's flight recorder of a healthy run", ""]
    if failed(section):
        return lines + failed(section)
    rows = [
        f"| {e['collective_seq_id']} | {e['profiling_name']} | {e['state']} | "
        f"{e['duration_ms']} | {e['input_sizes']} |"
        for e in section["last"]
    ]
    return lines + [
        f"Dump version {section['version']}, {section['entries']} entries; an entry's fields: "
        f"{', '.join(section['entry_keys'])}. The last:",
        "",
        "| seq | collective | state | GPU ms | sizes |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
        "torch.distributed.flight_recorder.fr_trace on the dumps:",
        "",
        "```",
        section["analyzer"].rstrip(),
        "```",
        "",
    ]


def torchao(section) -> list[str]:
    lines = ["## 14. torchao's FP8 training under FSDP2 beside bf16", ""]
    if failed(section):
        return lines + failed(section)
    runs = {"eager": section.get("eager"), "compiled": section.get("compiled")}
    runs |= {f"compiled, wider ({h})": r for h, r in section.get("wider", {}).items()}
    rows = []
    for label, run in runs.items():
        if not run or "error" in run:
            rows.append(f"| {label} | failed: {(run or {}).get('error')} | | | |")
            continue
        shape = f"hidden {run['config']['hidden']}, {run['config']['layers']} layers"
        for way in ("bf16", "float8"):
            r = run[way]
            rows.append(
                f"| {label.split(' (')[0]}, {shape} | {way} | "
                f"{r['all_gather_into_tensor_bytes']:,} | {r['step_s'] * 1e3:.1f} | "
                f"{r['losses'][-1]:.4f} |"
            )
    return lines + [
        f"torchao {section['torchao']}; the blocks' Linear layers in FP8, weights gathered in "
        "float8 (the last step's all-gather bytes received by rank 0; FSDP2 gathers nothing "
        "on one GPU). Random tokens at lr 1e-3: the losses show the runs ran, not training.",
        "",
        "| run | way | all-gather bytes | median step (ms) | last loss |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]
