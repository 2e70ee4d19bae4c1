"""ZeRO-1 and ZeRO-2 from scratch against DDP and PyTorch's ZeroRedundancyOptimizer, on 2 and 3
ranks (3: the flat buffer needs padding, and the sums an order), with parameter groups, a frozen tensor, tied weights, micro-batches and global-norm clipping
(zerobook.runs.zero_parity); and the flat buffer's bookkeeping in one process."""

import pytest
import torch

import zerobook as zb
from zerobook.accounting import memory
from zerobook.train import parity as parity_lib
from zerobook.zero.flat import FlatParams

pytestmark = (
    pytest.mark.launch
)  # starts ranks with torchrun (make test-quick leaves it out)

ADAM_STATE_BYTES = 4 + 4 + 4  # fp32 master weight, momentum, variance
STEP_COUNTER_BYTES = 4  # AdamW's step: one float32 scalar per parameter tensor it steps
CORRECT = (
    "zero1",
    "zero2",
    "zero2_no_sync",
    "zero3",
    "zero3_reshard_root",
    "sharded",
    "zero_ro",
)


@pytest.fixture(scope="module", params=[2, 3])
def parity(request):
    """One launch per world size: every method, 5 steps of 2 micro-batches, fp32, with every sum
    in rank order, unclipped and clipped (the ZeRO-1 chapter runs 10 steps of its methods)."""
    run = zb.torchrun(
        "zerobook.runs.zero_parity",
        nproc=request.param,
        echo=False,
        args=[
            "--dtype",
            "float32",
            "--steps",
            "5",
            "--scenarios",
            "parity",
            "clipped:zero1,zero2,zero2_no_sync,zero3,zero1_shard_norm",
        ],
    )
    return request.param, run


def elements_sent(run: dict, element_size: int) -> dict:
    """Per collective: bus bytes / element size, the elements a ring moves per rank."""
    return {op: e["bus_bytes"] / element_size for op, e in run["traffic"].items()}


def norm_numel(report: dict, run: dict) -> int:
    """Elements the norm sums: the padded gradient and the ranks' partial sums."""
    return run.get("padded", report["num_params"]) + report["world_size"]


def test_every_stage_is_bit_identical_to_the_ddp_that_reduces_as_it_does(parity):
    """Groups, a frozen tensor, tied weights, micro-batches: with every sum in rank order, each
    method ends with DDP's bits, and its norms differ from torch's only by the norm's own sum."""
    world_size, run = parity
    for report in run.ranks:
        runs = report["runs"]["parity"]
        for method in CORRECT:
            assert runs[method]["diff"] == 0.0, (method, runs[method]["diff"])
            bound = parity_lib.norm_bound(norm_numel(report, runs[method]))
            reference = runs[runs[method]["reference"]]["norms"]
            assert all(
                abs(a / b - 1) <= bound
                for a, b in zip(runs[method]["norms"], reference)
            ), method


def test_clipping_by_the_global_norm_and_the_shard_norm_mistake(parity):
    world_size, run = parity
    for report in run.ranks:
        runs = report["runs"]["clipped"]
        assert max(runs["ddp"]["norms"]) > report["max_norm"]  # clipping did act
        for method in ("zero1", "zero2", "zero2_no_sync", "zero3"):
            bound = parity_lib.norm_bound(norm_numel(report, runs[method]))
            first = runs[runs[method]["reference"]]["norms"][
                0
            ]  # same weights, same gradients
            assert abs(runs[method]["norms"][0] / first - 1) <= bound, method
        wrong = runs["zero1_shard_norm"]
        assert wrong["norms"][0] < runs["ddp"]["norms"][0]  # a part of the vector
        assert wrong["diff"] > max(
            runs[m]["diff"] for m in ("zero1", "zero2", "zero2_no_sync", "zero3")
        )


def test_optimizer_state_is_sharded(parity):
    world_size, run = parity
    for report in run.ranks:
        zero1, psi = report["runs"]["parity"]["zero1"], report["num_params"]
        assert zero1["padded"] == psi + (-psi) % world_size  # one bucket, padded to N
        shard = zero1["padded"] // world_size
        assert (
            zero1["optimizer_bytes"]
            == ADAM_STATE_BYTES * shard + STEP_COUNTER_BYTES * zero1["runs"]
        )
        assert (
            report["runs"]["parity"]["ddp"]["optimizer_bytes"] >= ADAM_STATE_BYTES * psi
        )  # everywhere
    # ShardedOptimizer deals whole tensors out as ZeroRedundancyOptimizer does: same bytes per rank
    assert [r["runs"]["parity"]["sharded"]["optimizer_bytes"] for r in run.ranks] == [
        r["runs"]["parity"]["zero_ro"]["optimizer_bytes"] for r in run.ranks
    ]


def test_traffic_per_rank_is_two_psi_times_n_minus_one_over_n(parity):
    world_size, run = parity
    report = run.ranks[0]
    size, psi, runs = (
        report["element_size"],
        report["num_params"],
        report["runs"]["parity"],
    )
    ddp = elements_sent(runs["ddp"], size)
    assert ddp == {"all_reduce": 2 * psi * (world_size - 1) / world_size}
    for method in ("zero1", "zero2_no_sync"):
        sent = elements_sent(runs[method], size)
        padded = runs[method]["padded"]
        assert (
            sent["reduce_scatter_tensor"]
            == sent["all_gather_into_tensor"]
            == padded * (world_size - 1) / world_size
        )
        norm = runs[method]["traffic"]["all_reduce"]  # the global norm: one fp32 scalar
        assert (norm["calls"], norm["bytes"]) == (1, 4)
    # reducing every micro-batch pays the reduce-scatter once per micro-batch
    every = elements_sent(runs["zero2"], size)
    assert (
        every["reduce_scatter_tensor"]
        == report["micro_batches"] * sent["reduce_scatter_tensor"]
    )


def test_zero2_holds_a_gradient_shard_plus_buckets_in_flight(parity):
    world_size, run = parity
    for report in run.ranks:
        runs, size = report["runs"]["parity"], report["element_size"]
        z = runs["zero2"]
        largest = max(z["bucket_numels"])
        in_flight = z["max_in_flight"] * (
            largest + largest // world_size
        )  # buffers and outputs
        filling = (
            3 * largest
        )  # two buckets open (backward's order is not exactly reversed), and
        # the fresh gradient being copied into one
        bound = size * (z["shard_numel"] + in_flight + filling)
        assert max(z["held"]) <= z["peak"] <= bound, (z["peak"], bound)
        # accumulating without syncing keeps every bucket at full size: 2Ψ, like stage 1
        assert max(runs["zero2_no_sync"]["held"]) >= size * z["padded"]
        assert (
            max(runs["zero1"]["held"]) == size * runs["zero1"]["padded"]
        )  # its one flat buffer


@pytest.fixture(scope="module")
def bf16():
    """One launch: stage 1, stage 3 and stage 3 with offload in bf16 (fp32 master), 3 steps."""
    run = zb.torchrun(
        "zerobook.runs.zero_parity",
        nproc=2,
        echo=False,
        args=[
            "--dtype",
            "bfloat16",
            "--steps",
            "3",
            "--methods",
            "zero1,zero3,zero3_offload",
        ],
    )
    return run.ranks


def test_bf16_stage1_matches_mixed_precision_ddp_and_the_calculator(bf16):
    for report in bf16:
        zero1, psi, world_size = (
            report["runs"]["parity"]["zero1"],
            report["num_params"],
            report["world_size"],
        )
        assert zero1["diff"] == 0.0  # bf16 weights, fp32 master: DDP's bits
        assert (
            zero1["param_bytes"] == 2 * zero1["padded"] + 2 * report["frozen"]
        )  # + the frozen bias, whole
        measured = zero1["param_bytes"] + max(zero1["held"]) + zero1["optimizer_bytes"]
        expected = memory.model_state_bytes(
            psi, stage=1, world_size=world_size
        ).total  # 2Ψ + 2Ψ + 12Ψ/N
        padding = zero1["padded"] - psi
        excess = (
            2 * report["frozen"]
            + (2 + 2) * padding
            + 12 * padding / world_size
            + STEP_COUNTER_BYTES * zero1["runs"]
        )
        assert measured - expected == excess, (measured, expected)


def test_flat_params_hold_a_tied_tensor_once_and_cut_shards_by_group():
    shared = torch.nn.Parameter(torch.ones(5))
    other = torch.nn.Parameter(torch.ones(6))
    frozen = torch.nn.Parameter(torch.ones(3), requires_grad=False)
    flat = FlatParams([shared, frozen, other, shared], world_size=4)
    assert flat.numel == 11 and flat.padded == 12 and len(flat.params) == 2
    assert shared.data_ptr() == flat.flat.data_ptr()  # a view of the flat buffer
    # shards of 3: rank 1 holds shared[3:5] and other[0:1], rank 3 other[3:6] + padding
    assert flat.shard_segments(1, ["a", "b"]) == [(0, 2, "a"), (2, 3, "b")]
    assert flat.shard_segments(3, ["a", "b"]) == [(0, 3, "b")]
    assert flat.shard_segments(1, ["a", "a"]) == [(0, 3, "a")]


def test_zero3_sends_three_psi_per_micro_batch_or_less_the_root_it_keeps(parity):
    world_size, run = parity
    report = run.ranks[0]
    size, micro, share = (
        report["element_size"],
        report["micro_batches"],
        (world_size - 1) / world_size,
    )
    for method in ("zero3_reshard_root", "zero3"):
        z = report["runs"]["parity"][method]
        sent = elements_sent(z, size)
        kept = (
            0 if method == "zero3_reshard_root" else z["units"]["root"]
        )  # not gathered again
        assert sent["reduce_scatter_tensor"] == micro * z["padded"] * share
        assert (
            sent["all_gather_into_tensor"] == micro * (2 * z["padded"] - kept) * share
        )


def test_zero3_keeps_sixteen_bytes_per_parameter_over_n_and_offload_moves_twelve_to_the_host(
    bf16,
):
    for report in bf16:
        z, offload = (
            report["runs"]["parity"]["zero3"],
            report["runs"]["parity"]["zero3_offload"],
        )
        assert (
            z["diff"] == offload["diff"] == 0.0
        )  # DDP's bits, in bf16, on the device or the host
        shard = z["padded"] // report["world_size"]
        assert (
            z["persistent_bytes"]
            == (2 + 2 + 12) * shard + STEP_COUNTER_BYTES * z["runs"]
        )
        assert (
            offload["resident_bytes"] == (2 + 2) * shard
        )  # the 16-bit weight and gradient shards
        assert offload["offloaded_bytes"] == 12 * shard + STEP_COUNTER_BYTES * z["runs"]
