"""zerobook.perfmodel: the shapes counted exactly (against released models, a paper's compute and
the course's own GPT measured by FlopCounterMode), the traffic formulas, the schedule's rules, and
clear errors for what it cannot price."""

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from zerobook.train import measure
from zerobook.accounting.hardware import A100_NODE, H100_NODE
from zerobook.train.models import GPT, GPTConfig
from zerobook.perfmodel import GPT3_175B, LLAMA3_8B, LLAMA3_70B, predict_step
from zerobook.perfmodel.models import course_gpt
from zerobook.perfmodel import collective_seconds, critical_tokens_per_gpu, nccl_choice
from zerobook.perfmodel.collectives import bus_bandwidth, link_bytes, ring_seconds
from zerobook.perfmodel.step import Layout, bucket_sizes
from zerobook.perfmodel.traffic import traffic_per_gpu


def test_parameter_counts_are_the_released_models():
    assert (
        LLAMA3_8B.num_params() == 8_030_261_248
    )  # Meta Llama 3 8B, its safetensors' total
    assert LLAMA3_70B.num_params() == 70_553_706_496
    h, layers, vocab = (
        12288,
        96,
        50257,
    )  # GPT-3 (Brown et al. 2020, Table 2.1): 96 x 12288, 2048 positions
    assert (
        GPT3_175B.num_params()
        == layers * (12 * h * h + 13 * h) + vocab * h + 2048 * h + 2 * h
    )
    assert (
        round(GPT3_175B.num_params() / 1e9, 1) == 174.6
    )  # the paper's "175.0B", counted exactly


def test_flops_per_token_give_the_published_training_compute_and_mfu():
    """GPT-3: 6 FLOPs per weight per token over 300B tokens is the paper's 3.14e23 (Table D.1).
    torchtitan's 64 x A100 Llama 3 8B run: 2904 tokens/s per GPU at 56.8% MFU, counted with the
    embedding in (6 x every parameter) and attention's 12 L h s, against 312 TFLOP/s."""
    attention = 12 * GPT3_175B.layers * GPT3_175B.hidden * 2048
    assert (
        round((GPT3_175B.flops_per_token(2048) - attention) * 300e9 / 1e23, 2) == 3.14
    )
    m = LLAMA3_8B
    with_embedding = m.flops_per_token(8192) + 6 * m.lookup_params()
    assert round(2904 * with_embedding / A100_NODE.peak_flops, 3) == 0.568


def test_the_course_gpt_counted_by_the_model_and_by_flop_counter_mode():
    config = GPTConfig(vocab=128, hidden=64, layers=2, heads=4, seq_len=32)
    spec = course_gpt(config)
    model = GPT(config)
    assert spec.num_params() == measure.num_params(model)
    tokens = torch.randint(128, (3, 32))
    with FlopCounterMode(display=False) as counter:
        model(tokens)
    assert counter.get_total_flops() == spec.layers * spec.block_forward_flops(
        3 * 32, 32
    ) + spec.root_forward_flops(3 * 32)


def test_hsdp_keeps_most_traffic_on_nvlink():
    """64 GPUs in nodes of 8, one NIC per GPU: ZeRO-3 over all 64 sends 3 Psi (less the root's
    second gather) x 63/64 per GPU, 7/8 of it over NVLink and 1/8 through its NIC (each channel
    leaves the node on one rail); HSDP keeps the gathers on NVLink and sends each rank's shard's
    all-reduce, 2 x 7/8 x Psi/8, all through its own NIC: per NIC, about 1.7 times fewer bytes."""
    psi, root, b = LLAMA3_8B.num_params(), LLAMA3_8B.root_params(), 2
    flat = traffic_per_gpu(LLAMA3_8B, 3, Layout(64, 8, 64))
    sent = 63 / 64 * (2 * psi - root) * b + 63 / 64 * psi * b
    assert flat == pytest.approx(
        {"nvlink": 7 / 8 * sent, "network": sent / 8}, rel=1e-15
    )
    hsdp = traffic_per_gpu(LLAMA3_8B, 3, Layout(64, 8, 8))
    inside = 7 / 8 * (2 * psi - root) * b + 7 / 8 * psi * b
    assert hsdp == pytest.approx(
        {"nvlink": inside, "network": 2 * 7 / 8 * psi / 8 * b}, rel=1e-15
    )
    assert 1.6 < flat["network"] / hsdp["network"] < 1.7
    ddp = traffic_per_gpu(LLAMA3_8B, 0, Layout(64, 8, 64))
    assert ddp["network"] == pytest.approx(2 * 63 / 64 * psi * b / 8, rel=1e-15)


def test_a_ring_s_bytes_per_link_are_exact():
    """All-gather of S over N ranks, k per node: each GPU sends (N-1)/N S; one node: all on
    NVLink; beyond it 1/k of it leaves through the NICs its rank owns, the rest stays on
    NVLink; an all-reduce sends twice as much."""
    s = 2**30
    assert link_bytes("all_gather", s, world_size=8, gpus_per_node=8) == {
        "nvlink": 7 / 8 * s,
        "nic": 0.0,
    }
    multi = link_bytes("all_gather", s, world_size=64, gpus_per_node=8)
    assert multi == {"nvlink": (1 - 1 / 8) * 63 / 64 * s, "nic": 63 / 64 * s / 8}
    assert link_bytes("all_reduce", s, world_size=8, gpus_per_node=1) == {
        "nvlink": 0.0,
        "nic": 2 * 7 / 8 * s,
    }
    half = link_bytes("all_gather", s, world_size=64, gpus_per_node=8, nics_per_gpu=0.5)
    assert (
        half["nic"] == 2 * multi["nic"]
    )  # four NICs for eight GPUs: each NIC carries twice


def test_the_ring_runs_at_its_slower_link():
    """The Simple ring's bandwidth term: the larger of NVLink bytes / NVLink bandwidth and NIC
    bytes / NIC bandwidth. Bus bandwidth per GPU: NVLink inside a node (NCCL's 18 x 20.6 GB/s on
    H100), the node's NICs beyond it (8 x 47 GB/s, what NCCL carries over a 400 Gb/s NIC; NVLink
    then carries only 7/8), one NIC for a group with one rank per node."""
    s = 2**32
    sent = link_bytes("all_gather", s, world_size=64, gpus_per_node=8)
    assert ring_seconds("all_gather", s, 64, 8, H100_NODE) == max(
        sent["nvlink"] / H100_NODE.intra_bandwidth,
        sent["nic"] / H100_NODE.nic_bandwidth,
    )
    assert bus_bandwidth(8, 8, H100_NODE) == pytest.approx(18 * 20.6e9, rel=1e-12)
    assert bus_bandwidth(64, 8, H100_NODE) == pytest.approx(8 * 47e9, rel=1e-12)
    assert bus_bandwidth(64, 8, A100_NODE) == pytest.approx(8 * 24e9, rel=1e-12)
    assert bus_bandwidth(8, 1, H100_NODE) == pytest.approx(47e9, rel=1e-12)


def test_nccl_s_choice_follows_size_and_scale():
    """Small messages: a low-latency protocol; large: Simple. One H100 node: NVLink SHARP for a
    large all-reduce; across many H100 nodes, NVLS inside and a tree across; A100s, no NVLS."""
    choose = lambda kind, size, n, hw: nccl_choice(
        kind, size, world_size=n, gpus_per_node=8, hardware=hw
    )[:2]
    assert choose("all_reduce", 2**12, 8, H100_NODE)[1] == "LL"
    assert choose("all_reduce", 2**32, 8, H100_NODE) == ("nvls", "Simple")
    assert choose("all_reduce", 2**29, 1984, H100_NODE) == ("nvls_tree", "Simple")
    assert choose("all_reduce", 2**32, 32, A100_NODE) == ("ring", "Simple")
    assert choose("all_reduce", 2**20, 1024, A100_NODE)[0] == "tree"
    assert choose("all_gather", 2**32, 64, H100_NODE) == ("ring", "Simple")


def test_the_latency_term_at_scale():
    """A ring all-gather over 1,024 ranks has 1,023 steps: with 256 KB per rank its latency
    outweighs its bytes (ZeRO-3's per-unit gathers at that scale are latency-bound)."""
    n, s = 1024, 1024 * 256 * 1024
    algorithm, protocol, seconds = nccl_choice(
        "all_gather", s, world_size=n, gpus_per_node=8, hardware=H100_NODE
    )
    assert (
        algorithm == "ring" and seconds > 1023 * 1e-6
    )  # every step at least a microsecond
    assert seconds > 2 * ring_seconds("all_gather", s, n, 8, H100_NODE) / (
        0.92 if protocol == "LL128" else 1
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (dict(kind="broadcast"), "kind must be one of"),
        (dict(size_bytes=-1), "size_bytes must be a finite number"),
        (dict(size_bytes=float("nan")), "size_bytes must be a finite number"),
        (dict(world_size=12), "not a multiple of gpus_per_node"),
        (dict(world_size=0), "world_size must be a positive integer"),
        (dict(gpus_per_node=16, world_size=32), "more than the node's 8 GPUs"),
    ],
)
def test_a_collective_s_bad_input_says_what_is_wrong(args, message):
    call = (
        dict(
            kind="all_gather",
            size_bytes=1e6,
            world_size=64,
            gpus_per_node=8,
            hardware=H100_NODE,
        )
        | args
    )
    kind, size = call.pop("kind"), call.pop("size_bytes")
    with pytest.raises(ValueError, match=message):
        collective_seconds(kind, size, **call)


def test_critical_tokens_per_gpu():
    """T* = F/B (N-1)/N for ZeRO-3 (F: the sustained FLOP/s, B: the ring's bus bandwidth): on
    H100s across nodes 0.80 x 989.4e12 / 376e9 x 63/64 (8 NICs at the 47 GB/s NCCL carries);
    the roofline's, 989.4e12 / 376e9 x 63/64, is the JAX scaling-book's ~2,475 x 63/64 with the
    NICs at their line rate (8 x 50 GB/s) instead. HSDP adds its replicas' all-reduce, 2 (R-1)/R Psi/G through one NIC: beside
    the shard group's three on NVLink (FSDP2's stream of its own), so the longer sets T*; after
    them when the shard group spans nodes (both through the NICs)."""
    h = H100_NODE
    across = critical_tokens_per_gpu(h, world_size=64, gpus_per_node=8)
    assert across == pytest.approx(0.80 * 989.4e12 / 376e9 * 63 / 64, rel=1e-12)
    bound = critical_tokens_per_gpu(h.roofline(), world_size=64, gpus_per_node=8)
    assert (
        bound == pytest.approx(989.4e12 / 376e9 * 63 / 64, rel=1e-12)
        and round(bound / 0.984375 * 47 / 50) == 2474
    )
    hsdp = critical_tokens_per_gpu(h, world_size=64, gpus_per_node=8, shard_group=8)
    inside, replicas = 7 / 8 / (18 * 20.6e9), 2 * 7 / 8 / 8 / 47e9
    assert hsdp == pytest.approx(0.80 * 989.4e12 * max(inside, replicas / 3), rel=1e-12)
    one_node = critical_tokens_per_gpu(h, world_size=8, gpus_per_node=8)
    assert inside > replicas / 3 and hsdp == pytest.approx(
        one_node, rel=1e-12
    )  # NVLink's
    two_nodes = critical_tokens_per_gpu(
        h, world_size=64, gpus_per_node=8, shard_group=16
    )
    ring = 3 * 15 / 16 / bus_bandwidth(16, 8, h)  # over two nodes' NICs
    replicas_of_16 = 2 * 3 / 4 / 16 / bus_bandwidth(4, 1, h)
    assert two_nodes == pytest.approx(
        0.80 * 989.4e12 * (ring + replicas_of_16) / 3, rel=1e-12
    )
    with pytest.raises(ValueError, match="shard_group 3 must divide"):
        critical_tokens_per_gpu(h, world_size=64, gpus_per_node=8, shard_group=3)


def test_presets_predict_and_the_roofline_is_a_bound():
    """Each preset carries its sustained fraction and where it comes from; the roofline
    (sustained 1.0, no elementwise time) is an upper bound on the MFU the preset predicts."""
    assert (
        H100_NODE.sustained == 0.80
        and "gpu_h100_2026-11-23" in H100_NODE.sustained_source
    )
    assert A100_NODE.sustained == 0.869 and "Matmul" in A100_NODE.sustained_source
    for hw in (H100_NODE, A100_NODE):
        bound = predict(hardware=hw.roofline())
        assert predict(hardware=hw).mfu < bound.mfu <= 1.0
    with pytest.raises(ValueError, match="sustained must be in"):
        H100_NODE.with_(sustained=1.2)


def predict(hardware=A100_NODE, **changes):
    options = dict(
        world_size=64,
        gpus_per_node=8,
        stage=3,
        micro_batch=1,
        seq_len=8192,
        activation_checkpointing="matmul_inputs",
    )
    return predict_step(LLAMA3_8B, hardware, **{**options, **changes})


def test_the_schedule_keeps_each_stream_in_order_and_adds_up():
    p = predict()
    for stream in ("compute", "communication"):
        spans = [s for s in p.timeline if s.stream == stream]
        assert all(
            a.end <= b.start + 1e-12 for a, b in zip(spans, spans[1:])
        )  # one at a time
    assert max(s.end for s in p.timeline) == p.step_s
    assert p.step_s == pytest.approx(p.compute_s + p.exposed_comm_s, rel=1e-12)
    assert p.compute_s <= p.step_s <= p.compute_s + p.comm_s


def test_hsdps_all_reduce_runs_on_a_stream_of_its_own_inside_a_node_and_after_across():
    """FSDP2's all_reduce_stream: each unit's replicas' all-reduce after its reduce-scatter,
    beside the next unit's (shard group inside a node); on the communication stream when the
    shard group spans nodes and shares their NICs."""
    inside = predict(world_size=64, shard_group=8)
    replicas = [s for s in inside.timeline if s.stream == "replicas"]
    scatters = {
        s.unit: s
        for s in inside.timeline
        if s.stream == "communication" and s.what == "reduce-scatter"
    }
    assert replicas and {s.what for s in replicas} == {"all-reduce (replicas)"}
    assert all(s.start >= scatters[s.unit].end - 1e-12 for s in replicas)
    assert all(a.end <= b.start + 1e-12 for a, b in zip(replicas, replicas[1:]))
    beside = [
        (r, c)
        for r in replicas
        for c in scatters.values()
        if c.unit != r.unit and c.start < r.end and r.start < c.end
    ]
    assert beside, "no all-reduce ran beside another unit's reduce-scatter"
    across = predict(world_size=64, shard_group=16)
    assert {s.stream for s in across.timeline} == {"compute", "communication"}
    assert any(s.what == "all-reduce (replicas)" for s in across.timeline)


def test_zero12s_gather_after_the_step_or_ahead_of_the_next_forward():
    """DeepSpeed's ZeRO-1/2 (and ours) all-gather the updated weights after the optimizer step,
    with nothing left to hide them; Megatron's distributed optimizer (overlap_param_gather)
    gathers each block's just ahead of its next forward, as ZeRO-3's forward does."""
    # a fused loss (4 bytes a logit) lets stage 1 fit: the schedule is what is tested here
    on_one_node = dict(world_size=8, gpus_per_node=8, hardware=H100_NODE, logit_bytes=4)
    for stage in (1, 2):
        exposed = predict(stage=stage, **on_one_node)
        ahead = predict(stage=stage, param_gather="next_forward", **on_one_node)
        step_ends = max(s.end for s in exposed.timeline if s.what == "optimizer step")
        assert [s.unit for s in exposed.timeline if s.what == "all-gather"] == ["all"]
        assert all(
            s.start >= step_ends for s in exposed.timeline if s.what == "all-gather"
        )
        gathered = [s.unit for s in ahead.timeline if s.what == "all-gather"]
        assert gathered == ["root"] + [f"blocks.{k}" for k in range(32)]
        assert max(s.end for s in ahead.timeline) == pytest.approx(
            max(s.end for s in ahead.timeline if s.what == "optimizer step")
        )  # the step ends with the optimizer: no gather left after it
        assert (
            ahead.exposed_comm_s < exposed.exposed_comm_s
            and ahead.step_s < exposed.step_s
        )
        zero3 = predict(stage=3, **on_one_node)
        assert ahead.step_s == pytest.approx(zero3.step_s, rel=1e-9)  # the same forward
    assert (
        predict(stage=3, param_gather="next_forward").step_s == predict(stage=3).step_s
    )
    with pytest.raises(ValueError, match="param_gather must be one of"):
        predict(stage=1, param_gather="overlapped")


def test_prefetch_hides_gathers():
    with_prefetch, without = predict(), predict(prefetch=False)
    assert with_prefetch.exposed_comm_s < without.exposed_comm_s
    assert without.exposed_comm_s == pytest.approx(
        without.comm_s, rel=1e-9
    )  # nothing overlaps


def test_a_cpu_host_cannot_overlap():
    p = predict(hardware=H100_NODE.with_(overlap=False))
    assert p.step_s == pytest.approx(p.compute_s + p.comm_s, rel=1e-12)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(stage=0), "does not fit"),
        (dict(world_size=12), "not a multiple of gpus_per_node"),
        (dict(shard_group=3), "must divide world_size"),
        (
            dict(
                world_size=64,
                shard_group=16,
                gpus_per_node=4,
                hardware=A100_NODE.with_(gpus_per_node=2),
            ),
            "more than",
        ),
        (dict(shard_group=12, world_size=48), "whole nodes or divide a node"),
        (dict(micro_batch=-1), "micro_batch must be a positive integer"),
        (dict(activation_checkpointing="some"), "activation_checkpointing one of"),
        (dict(stage=2, bucket_params=0), "bucket_params must be a positive integer"),
    ],
)
def test_bad_input_says_what_is_wrong(changes, message):
    with pytest.raises(ValueError, match=message):
        predict(**changes)


def test_buckets_cut_the_gradients_into_that_many_collectives():
    """ZeRO-2 with buckets of b elements: ceil(Psi / b) reduce-scatters and as many all-gathers,
    each priced as NCCL's collective of its bucket over the node."""
    hw, psi, b = H100_NODE, LLAMA3_8B.num_params(), 10**8
    p = predict(hardware=hw, world_size=8, stage=2, bucket_params=b)
    rounding = 4 * math.ulp(p.step_s)
    for what in ("reduce-scatter", "all-gather"):
        spans = [s for s in p.timeline if s.what == what]
        assert len(spans) == len(bucket_sizes(psi, b)) == -(-psi // b)
        priced = [
            collective_seconds(
                what.replace("-", "_"),
                2 * n,
                world_size=8,
                gpus_per_node=8,
                hardware=hw,
            )
            for n in bucket_sizes(psi, b)
        ]
        assert [s.end - s.start for s in spans] == pytest.approx(
            priced, rel=0, abs=rounding
        )
    assert (
        len(
            [
                s
                for s in predict(world_size=8, stage=2).timeline
                if s.what == "reduce-scatter"
            ]
        )
        == LLAMA3_8B.layers + 1
    )


def test_a_reduce_scatter_costs_the_hardwares_multiple_of_an_all_reduce():
    """By default a reduce-scatter is its own collective (NCCL's ring); a preset that says 1.5
    (gloo's: an all-reduce and copies) pays 1.5 all-reduces of its group."""
    ring, gloo = (
        predict(hardware=H100_NODE.with_(reduce_scatter=r), world_size=8, stage=2)
        for r in (None, 1.5)
    )
    seconds = lambda p: [
        s.end - s.start for s in p.timeline if s.what == "reduce-scatter"
    ]
    size = LLAMA3_8B.block_params() * 2
    rounding = 4 * math.ulp(
        gloo.step_s
    )  # a span's end - start: each rounded at the step's scale
    price = lambda kind: collective_seconds(
        kind, size, world_size=8, gpus_per_node=8, hardware=H100_NODE
    )
    assert seconds(ring)[0] == pytest.approx(
        price("reduce_scatter"), rel=0, abs=rounding
    )
    *blocks, root = seconds(gloo)  # one per block, then the root's
    assert blocks == pytest.approx(
        [1.5 * price("all_reduce")] * LLAMA3_8B.layers, rel=0, abs=rounding
    )


def test_a_model_that_does_not_fit_can_still_be_priced_on_request():
    p = predict(stage=0, allow_oom=True)
    assert not p.fits and p.peak_memory_bytes > A100_NODE.memory_bytes


CALIBRATION = {
    "world_size": 2,
    "compute_seconds": 0.2,
    "optimizer_seconds": {"2": 0.01},
    "backend": "gloo",
    "all_reduce": {"alpha": 3e-4, "beta": 1e-9},
    "reduce_scatter_over_all_reduce": 1.4,
}


def test_the_timed_runs_are_predicted_with_their_own_buckets():
    """predict_runs tells each timed method its gradient buckets (ZeRO-2: zero_speed's, one
    reduce-scatter per 2^18 elements; our ZeRO-1: one; ZeRO-3: one per unit); naive: one per unit."""
    from zerobook.perfmodel.machine import ZERO2_BUCKET_NUMEL, predict_runs
    from zerobook.runs import zero_speed

    assert ZERO2_BUCKET_NUMEL == zero_speed.BUCKET_NUMEL
    config = GPTConfig(vocab=4096, hidden=256, layers=4, heads=4, seq_len=128)
    spec = course_gpt(config)
    calibration = {**CALIBRATION, "num_params": spec.num_params()}
    runs, naive = (
        predict_runs(calibration, spec, batch=4, seq_len=128, naive=flag)
        for flag in (False, True)
    )
    count = lambda p: sum(s.what == "reduce-scatter" for s in p.timeline)
    assert count(runs["ZeRO-2"]) == len(
        bucket_sizes(spec.num_params(), ZERO2_BUCKET_NUMEL)
    )
    assert (count(runs["ZeRO-1"]), count(runs["ZeRO-3"]), count(naive["ZeRO-2"])) == (
        1,
        5,
        5,
    )
    assert (
        runs["ZeRO-2"].comm_s > naive["ZeRO-2"].comm_s
    )  # more latencies, and gloo's dearer reduce-scatter


def test_this_machines_preset_reproduces_what_was_calibrated():
    """machine_hardware turns runs.calibrate's numbers into a preset; predicting with it gives the
    calibrated compute and optimizer seconds back, and a ring time from the fitted alpha-beta."""
    from zerobook.perfmodel.machine import forward_flops, machine_hardware

    config = GPTConfig(vocab=4096, hidden=256, layers=4, heads=4, seq_len=128)
    spec, psi = course_gpt(config), measure.num_params(GPT(config))
    calibration = {**CALIBRATION, "num_params": psi}
    hw = machine_hardware(calibration, spec, batch=4, seq_len=128)
    p = predict_step(
        spec,
        hw,
        world_size=2,
        gpus_per_node=2,
        stage=1,
        micro_batch=4,
        seq_len=128,
        dtype="fp32",
    )
    assert hw.peak_flops * 0.2 == pytest.approx(
        3 * forward_flops(spec, 512, 128), rel=1e-12
    )
    assert p.compute_s == pytest.approx(
        0.2 + 0.01, rel=1e-12
    )  # forward + backward, then the optimizer
    assert hw.overlap is False and hw.intra_bandwidth == pytest.approx(1e9)
    assert hw.reduce_scatter == 1.4  # the ratio it measured


def test_the_published_rows_are_predicted_within_the_goal():
    """Every published row has a source, a quote and its assumptions; one is fitted and the
    constant is its fit; every other row's predicted / published is within the goal, except the
    rows that say why they are not (and are truly outside it); all-reduce and all-gather rows."""
    from zerobook.accounting.hardware import ELEMENTWISE_BYTES
    from zerobook.perfmodel.published import (
        GOAL,
        ROWS,
        fit_elementwise_bytes,
        predict_all,
    )

    assert sum(r["fitted"] for r in ROWS) == 1 and len(ROWS) >= 8
    assert round(fit_elementwise_bytes()) == round(ELEMENTWISE_BYTES)
    for row in predict_all():
        assert row["cite"] and row["quote"] and row["assumed"] and row["where"], row[
            "id"
        ]
        within = abs(row["ratio"] - 1) <= GOAL[row["kind"]]
        assert within == (row["outside"] is None), row["id"]  # outside, and says why
    kinds = {r.get("collective") for r in ROWS if r["kind"] == "busbw"}
    assert kinds == {"all_reduce", "all_gather"}


def test_each_row_is_priced_with_its_runs_reduction_dtype_and_micro_batches():
    """MosaicML's MP Mode DEFAULT and torchtitan reduce gradients in fp32, PURE in bf16; a
    row's MicroBatchSize and GradAccum are its quote's (each micro-batch reduce-scattered, as
    Composer syncs FSDP). Reducing in bf16 instead of fp32 moves a row by under 1.5%."""
    from zerobook.perfmodel.published import FOUNDRY, ROWS, predict_tokens

    rows = [r for r in ROWS if r["kind"] == "tokens"]
    for row in rows:
        mode = "PURE" if row["reduce_dtype"] == "bf16" else "DEFAULT"
        if row["cite"] == FOUNDRY:
            assert f"| {row['micro_batch']} | {row['micro_batches']} |" in row["quote"]
            assert f"| {mode} | FULL_SHARD |" in row["quote"], row["id"]
        else:
            assert row["reduce_dtype"] == "fp32" and row["micro_batches"] == 1
        bf16, fp32 = (predict_tokens(row, reduce_dtype=d) for d in ("bf16", "fp32"))
        assert 1 <= bf16 / fp32 < 1.015, row["id"]
    assert {r["micro_batches"] for r in rows} == {1, 2, 4}


def test_rows_whose_network_is_not_stated_barely_depend_on_it():
    """Where a publication omits the network, the row assumes the DGX's 8 x 400 Gb/s: with
    half of it (one NIC per two GPUs) the prediction moves by under 1%."""
    from zerobook.perfmodel.published import HARDWARE, ROWS, predict_tokens

    assumed = [r for r in ROWS if "network not stated" in r["assumed"]]
    assert len(assumed) >= 5
    for row in assumed:
        hw = HARDWARE[row["hardware"]]
        half = hw.with_(nic_bandwidth=hw.nic_bandwidth / 2)
        assert 0.99 < predict_tokens(row, half) / predict_tokens(row) <= 1, row["id"]


def test_mpt_as_benchmarked_has_the_tables_parameter_counts():
    """MosaicML's table gives NumParams per run: 6,658,859,008 for 7b and 64,862,437,376 for
    70b at 2,048 tokens (learned positions count: 6,654,664,704 at 1,024); 12,853,954,560
    for 13b and 29,975,214,080 for 30b."""
    from zerobook.perfmodel.published import mpt

    assert mpt(32, 4096, 2048).num_params() == 6_658_859_008
    assert mpt(40, 5120, 2048).num_params() == 12_853_954_560
    assert mpt(48, 7168, 2048).num_params() == 29_975_214_080
    assert mpt(32, 4096, 1024).num_params() == 6_654_664_704
    assert mpt(80, 8192, 2048).num_params() == 64_862_437_376
