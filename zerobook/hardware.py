"""Accelerator facts the book uses, with their sources. Throughput in FLOP/s, memory in bytes."""

TFLOPS = 1e12

# NVIDIA H100 SXM5, tensor-core peak throughput (NVIDIA H100 Tensor Core GPU datasheet). The
# datasheet's largest figure is FP8 *with 2:4 structured sparsity*; dense figures are half of the
# sparse ones, and BF16 is half of FP8.
H100_SXM = {
    "bf16_dense": 989.4 * TFLOPS,
    "bf16_sparse": 1978.9 * TFLOPS,
    "fp8_dense": 1978.9 * TFLOPS,
    "fp8_sparse": 3957.8 * TFLOPS,
    "memory_bytes": 80e9,
}
