"""gpu_report's tables of the host's paths, memory and links: the header, which collectives and
runs work on each placement, the CUDA allocator against the calculator, bandwidth, step times and
streams; `failed`, the line a skipped or failed section shows."""

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
