"""The markdown of benchmarks/gpu.py's results: each section's table and the ratios it is for."""

from zerobook.pages import gpu_record
from zerobook.accounting.hardware import datasheet
from zerobook.accounting.traffic import bandwidth as bus_bandwidth

MiB, TFLOPS = 2**20, 1e12
OPS = {
    "builtin": "all_reduce",
    "ring": "all_reduce",
    "reduce_scatter": "reduce_scatter",
    "all_gather": "all_gather",
}


def header(results: dict) -> list[str]:
    env = results["environment"]
    where = (
        (
            f"{env['device']}, driver {env['driver']}, torch {env['torch']}, CUDA {env['cuda']}, NCCL {env['nccl']}, "
            f"{env['gpus']} GPU(s)"
        )
        if env.get("gpus")
        else f"no GPU (torch {env['torch']}): the dry run, CPU only"
    )
    lines = [
        f"# GPU check, measured on {env.get('device', 'CPU')} on {env['date']}",
        "",
        where,
        "",
    ]
    if results.get("dry_run"):
        lines += [
            "**Dry run**: the CPU path of each section, small; nothing here is a GPU measurement.",
            "",
        ]
    return lines


def failed(section) -> list[str] | None:
    """The section's own line when it was skipped or failed, else None."""
    if isinstance(section, str):
        return [section, ""]
    if isinstance(section, dict) and "error" in section and "traceback" in section:
        return [
            f"failed: {section['error']}",
            "",
            "```",
            section["traceback"],
            "```",
            "",
        ]
    return None


def collectives(section) -> list[str]:
    lines = ["## 1. Collectives on CUDA tensors", ""]
    if failed(section):
        return lines + failed(section)
    ops = list(next(iter(section.values())))
    lines += [
        "| placement | " + " | ".join(ops) + " |",
        "| --- |" + " --- |" * len(ops),
    ]
    return (
        lines
        + [
            f"| {label} | " + " | ".join(row[op].replace("|", "/") for op in ops) + " |"
            for label, row in section.items()
        ]
        + [""]
    )


def runs(
    section, title: str = "## 2. Every run with device tensors", what: str = "run"
) -> list[str]:
    lines = [title, ""]
    if failed(section):
        return lines + failed(section)
    labels = sorted({label for row in section.values() for label in row})
    lines += [
        f"| {what} | " + " | ".join(labels) + " |",
        "| --- |" + " --- |" * len(labels),
    ]
    cell = lambda r: (
        f"ok ({r['seconds']} s)"
        if r["ok"]
        else "failed: " + r["error"].replace("|", "/")
    )
    return (
        lines
        + [
            f"| {run} | "
            + " | ".join(cell(row[label]) if label in row else "" for label in labels)
            + " |"
            for run, row in section.items()
        ]
        + [""]
    )


def memory_rows(report: dict) -> list[str]:
    """Per method: the calculator, live/calculator per term, the allocator, and the step's peak
    above the states against 8Ψ/N (ZeRO: the fp32 gradient shard the step makes, 4Ψ/N, and AdamW's
    foreach temporaries as large; DDP: 8Ψ)."""
    rows = []
    for method, m in report["methods"].items():
        calc, live, cuda = m["calculator"], m["live"], m["cuda"]
        term = lambda k: f"{live[k] / calc[k]:.3f}" if calc[k] else "-"
        step = (
            8 * m["num_params"] / (report["world_size"] if m["stage"] else 1)
        )  # fp32 grad + AdamW's temporaries
        states = (
            f"{cuda['states'] / MiB:.1f} | {cuda['states'] / calc['total']:.3f} | {cuda['peak'] / MiB:.1f} | "
            f"{(cuda['peak'] - cuda['states']) / MiB:.1f} | {(cuda['peak'] - cuda['states']) / step:.2f}"
            if cuda
            else "- | - | - | - | -"
        )
        rows.append(
            f"| {method} | {calc['total'] / MiB:.1f} | {term('params')} | {term('grads')} | {term('optimizer')} | "
            f"{live['gathered'] / MiB:.1f} | {states} |"
        )
    return rows


def memory(
    section, title="## 3. The CUDA allocator against the calculator (bytes per rank)"
) -> list[str]:
    lines = [title, ""]
    if failed(section):
        return lines + failed(section)
    for n, report in section.items():
        first = next(iter(report["methods"].values()))
        lines += [
            f"N = {n} ({report['backend']} on {report['device'].split(':')[0]}), "
            f"Ψ = {first['num_params']:,} bf16 parameters, mixed-precision AdamW:",
            "",
            "| method | calculator MiB | live/calc params | grads | optimizer | gathered MiB | "
            "allocator MiB | allocator/calc | peak MiB | peak - states MiB | (peak - states) / 8Ψ/N |",
            "| --- |" + " --- |" * 10,
            *memory_rows(report),
            "",
        ]
    return lines


def bandwidth(section) -> list[str]:
    lines = ["## 4. Collective bandwidth (nccl-tests' algbw and busbw)", ""]
    if failed(section):
        return lines + failed(section)
    n, largest = section["world_size"], max(r["bytes"] for r in section["rows"])
    lines += [
        f"{section['placement']}, N = {n}, at {largest / MiB:.4g} MiB:",
        "",
        "| collective | seconds | algbw GB/s | busbw GB/s |",
        "| --- | --- | --- | --- |",
    ]
    for row in (r for r in section["rows"] if r["bytes"] == largest):
        bw = bus_bandwidth(row["bytes"], row["seconds"], OPS[row["impl"]], n)
        lines.append(
            f"| {row['impl']} | {row['seconds']:.4g} | {bw['algbw'] / 1e9:.2f} | {bw['busbw'] / 1e9:.2f} |"
        )
    return lines + [""]


def step_times(section) -> list[str]:
    lines = ["## 5. ZeRO-3 step time: ours vs FSDP2, and prefetch", ""]
    if failed(section):
        return lines + failed(section)
    lines += [
        "| placement | N | ours ms | ours + prefetch ms | FSDP2 (defaults) ms | FSDP2 + explicit prefetch ms | ours/FSDP2 | "
        "prefetch saved / min(comm, compute) | machine's overlap bound | CUDA peak ours/FSDP2 |",
        "| --- |" + " --- |" * 9,
    ]
    for label, r in section.items():
        m, lanes = r["median"], r["lanes"]
        efficiency = (m["ours"] - m["ours_prefetch"]) / min(
            lanes["communication"], lanes["computation"]
        )
        peak = (
            f"{r['peak']['ours'] / r['peak']['fsdp2']:.2f}"
            if r["peak"]["ours"]
            else "-"
        )
        lines.append(
            f"| {label} | {r['world_size']} | "
            + " | ".join(
                f"{m[k] * 1e3:.1f}"
                for k in ("ours", "ours_prefetch", "fsdp2", "fsdp2_prefetch")
            )
            + f" | {m['ours'] / m['fsdp2']:.2f} | {efficiency:.2f} | {r['machine']['bound']:.2f} | {peak} |"
        )
    return lines + [""]


def streams(section) -> list[str]:
    lines = ["### Streams: what ZeRO-3's collectives and copies run beside", ""]
    if failed(section):
        return lines + failed(section)
    lines += [
        "One step with forward prefetch, from the profiler's trace (ms):",
        "",
        "| placement | kind | count | streams | busy ms | beside a compute kernel ms |",
        "| --- |" + " --- |" * 5,
    ]
    for label, kinds in section.items():
        for kind, k in kinds.items():
            beside = f"{k['beside_compute_us'] / 1e3:.2f}" if kind != "compute" else "-"
            lines.append(
                f"| {label} | {kind} | {k['count']} | {k['streams']} | {k['busy_us'] / 1e3:.2f} | {beside} |"
            )
    return lines + [""]


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


def render(results: dict) -> str:
    device = results["environment"].get("device", "CPU")
    parts = header(results)
    for name, fn in (
        ("collectives", collectives),
        ("runs", runs),
        (
            "labs",
            lambda section: runs(
                section, "### Every lab's reference solution, part by part", "lab/part"
            ),
        ),
        ("memory", memory),
        (
            "memory_expandable",
            lambda section: memory(
                section,
                "### The same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            ),
        ),
        ("bandwidth", bandwidth),
        ("step_times", step_times),
    ):
        if name in results:
            parts += fn(results[name])
    if "streams" in results:
        parts += streams(results["streams"])
    if "matmul" in results:
        parts += matmul(results["matmul"], device)
    if "compute_model" in results:
        parts += compute_model(results["compute_model"], results["matmul"])
    if "offload" in results:
        parts += offload(results["offload"])
    if "capstone" in results:
        parts += capstone(results["capstone"])
    if "quantize" in results:
        parts += quantize(results["quantize"])
    if "nccl_debug" in results:
        parts += nccl_debug(results["nccl_debug"])
    if "fp8_matmul" in results:
        parts += fp8_matmul(results["fp8_matmul"], device)
    if "flight_recorder" in results:
        parts += flight_recorder(results["flight_recorder"])
    if "torchao" in results:
        parts += torchao(results["torchao"])
    return "\n".join(parts)
