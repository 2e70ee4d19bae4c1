"""benchmarks/gpu.py's sections that time the device's arithmetic: matrix-multiply FLOP/s (bf16,
TF32, fp32 and FP8), the performance model's compute time against a measured step, the capstone's
training, qwZ's block quantization and torchao's FP8 training under FSDP2."""

import time

import torch

from gpu_paths import first_line, gpu_count, launch

CAPSTONE_MODEL = [
    "--hidden",
    "768",
    "--layers",
    "12",
    "--heads",
    "12",
    "--seq-len",
    "512",
    "--batch",
    "32",
    "--steps",
    "2000",
    "--warmup",
    "100",
    "--lr",
    "1e-3",
    "--eval-every",
    "250",
    "--eval-batches",
    "16",
    "--log-every",
    "250",
    "--sample",
    "400",
]
CAPSTONE_DRY = [
    "--steps",
    "6",
    "--eval-every",
    "6",
    "--eval-batches",
    "1",
    "--sample",
    "8",
]


def capstone(gpus: int) -> dict:
    """The capstone's run on one GPU (world size 1: NCCL refuses two ranks on one GPU), plain
    and under FSDP2, the model sized for a few minutes."""
    args, backend = (CAPSTONE_MODEL, "nccl") if gpus else (CAPSTONE_DRY, "gloo")
    return {
        method: launch("capstone", (1, backend, {}), args + ["--method", method], 580)
        for method in ("single", "fsdp2")
    }


def flops_per_second(product, n: int, repeats: int = 10) -> float:
    """FLOP/s of `product()`, an n x n x n matrix product, on this host's first device: three
    calls to warm up, then `repeats` timed (CUDA events on a GPU, the wall clock on a CPU)."""
    for _ in range(3):
        product()
    if not gpu_count():
        start = time.perf_counter()
        for _ in range(repeats):
            product()
        return 2 * n**3 * repeats / (time.perf_counter() - start)
    begin, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    begin.record()
    for _ in range(repeats):
        product()
    end.record()
    torch.cuda.synchronize()
    return 2 * n**3 * repeats / (begin.elapsed_time(end) / 1e3)


def matmul(n: int, dtype: torch.dtype, tf32: bool = False, repeats: int = 10) -> float:
    """FLOP/s of an n x n x n product on this host's first device (CUDA events on a GPU)."""
    device = "cuda" if gpu_count() else "cpu"
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        return flops_per_second(lambda: a @ b, n, repeats)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def matmuls(gpus: int) -> dict:
    n = 8192 if gpus else 256
    return {
        "n": n,
        "bf16": matmul(n, torch.bfloat16),
        "tf32": matmul(n, torch.float32, tf32=True),
        "fp32": matmul(n, torch.float32),
    }


def compute_model(gpus: int) -> dict:
    """The course GPT's forward + backward, measured (zerobook.runs.calibrate on one rank) against
    3 x its forward FLOPs (perfmodel's count) at the measured fp32 matrix-multiply rate."""
    from zerobook.train.models import GPTConfig
    from zerobook.perfmodel.models import course_gpt

    sizes = [(256, 4, 4), (1024, 8, 16)] if gpus else [(64, 2, 2)]
    placement = (1, "nccl" if gpus else "gloo", {})
    out = []
    for hidden, layers, batch in sizes:
        config = GPTConfig(
            vocab=4096, hidden=hidden, layers=layers, heads=4, seq_len=128
        )
        measured = launch(
            "calibrate",
            placement,
            ["--hidden", hidden, "--layers", layers, "--batch", batch],
            300,
        )
        spec, tokens = course_gpt(config), batch * config.seq_len
        flops = 3 * (
            spec.layers * spec.block_forward_flops(tokens, config.seq_len)
            + spec.root_forward_flops(tokens)
        )
        out.append(
            dict(
                hidden=hidden,
                layers=layers,
                batch=batch,
                flops=flops,
                seconds=measured["compute_seconds"],
            )
        )
    return out


def quantize(gpus: int) -> dict:
    """ZeRO++'s qwZ blocks (zerobook.zero.quantized, the chapter's code) timed on the device:
    seconds per element to quantize and to dequantize, and the link speed below which qwZ's
    gather of a unit ends sooner than bf16's on 8 ranks (the zeropp chapter shows it)."""
    from zerobook.zero.quantized import break_even_bandwidth, cost

    elements = 2**26 if gpus else 2**16
    per_element = cost(elements=elements, device="cuda" if gpus else "cpu")
    return {
        **per_element,
        "elements": elements,
        "break_even": break_even_bandwidth(per_element, world_size=8),
    }


def fp8_matmul(n: int = 8192, repeats: int = 10) -> dict:
    """FLOP/s of an n x n x n product in float8 e4m3 (torch._scaled_mm, one scale a tensor, a
    bf16 result: what torchao's float8 training runs, and why FSDP2 can gather its weights in
    FP8) beside bf16's, on an FP8 tensor core (compute capability 8.9 and up)."""
    if torch.cuda.get_device_capability() < (8, 9):
        return "skipped: no FP8 tensor core (compute capability below 8.9)"
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
    one = torch.ones((), device="cuda")
    fp8 = flops_per_second(
        lambda: torch._scaled_mm(
            a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16
        ),
        n,
        repeats,
    )
    return {"n": n, "fp8": fp8, "bf16": matmul(n, torch.bfloat16)}


TORCHAO_MODEL = ["--hidden", "2048", "--layers", "8", "--heads", "16"]
TORCHAO_MODEL += ["--seq-len", "1024", "--batch", "8", "--steps", "8"]
# wider blocks, compiled, where FP8's matmuls may outrun its casts: hidden -> heads
TORCHAO_WIDER = {4096: 32, 8192: 64}
TORCHAO_WIDE = ["--layers", "2", "--seq-len", "2048", "--batch", "4", "--steps", "6"]


def torchao_fp8(gpus: int) -> dict:
    """torchao's FP8 training under FSDP2 (zerobook.runs.fsdp2_torchao: float8 all-gathers and
    FP8 matmuls) beside bf16, eager and with each block compiled, on every GPU: bytes gathered,
    step time, losses; then wider blocks, compiled (`wider`: hidden -> report). torchao is not a
    requirement of the course: skipped where it is missing."""
    try:
        import torchao
    except ImportError:
        return "skipped: torchao is not installed (the course does not require it)"
    out = {"torchao": torchao.__version__}
    for label, extra in (("eager", []), ("compiled", ["--compile"])):
        try:
            out[label] = launch(
                "fsdp2_torchao", (gpus, "nccl", {}), TORCHAO_MODEL + extra
            )
        except Exception as error:  # noqa: BLE001 - one way's failure must not lose the other
            out[label] = {"error": first_line(error), "detail": str(error)[-1500:]}
    out["wider"] = {}
    for hidden, heads in TORCHAO_WIDER.items():
        size = [
            "--hidden",
            str(hidden),
            "--heads",
            str(heads),
            *TORCHAO_WIDE,
            "--compile",
        ]
        try:
            out["wider"][hidden] = launch("fsdp2_torchao", (gpus, "nccl", {}), size)
        except Exception as error:  # noqa: BLE001 - as above
            out["wider"][hidden] = {"error": first_line(error)}
    return out
