"""zerobook.perfmodel: the shapes counted exactly (against released models, a paper's compute and
the course's own GPT measured by FlopCounterMode), the traffic formulas, the schedule's rules, and
clear errors for what it cannot price."""
import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from zerobook import measure
from zerobook.hardware import A100_NODE, H100_NODE
from zerobook.models import GPT, GPTConfig
from zerobook.perfmodel import GPT3_175B, LLAMA3_8B, LLAMA3_70B, ModelSpec, predict_step
from zerobook.perfmodel.models import course_gpt
from zerobook.perfmodel.step import Layout, bucket_sizes, ring_seconds, traffic_per_gpu


def test_parameter_counts_are_the_released_models():
    assert LLAMA3_8B.num_params() == 8_030_261_248  # Meta Llama 3 8B, its safetensors' total
    assert LLAMA3_70B.num_params() == 70_553_706_496
    h, layers, vocab = 12288, 96, 50257  # GPT-3 (Brown et al. 2020, Table 2.1): 96 x 12288, 2048 positions
    assert GPT3_175B.num_params() == layers * (12 * h * h + 13 * h) + vocab * h + 2048 * h + 2 * h
    assert round(GPT3_175B.num_params() / 1e9, 1) == 174.6  # the paper's "175.0B", counted exactly


def test_flops_per_token_give_the_published_training_compute_and_mfu():
    """GPT-3: 6 FLOPs per weight per token over 300B tokens is the paper's 3.14e23 (Table D.1).
    torchtitan's 64 x A100 Llama 3 8B run: 2904 tokens/s per GPU at 56.8% MFU, counted with the
    embedding in (6 x every parameter) and attention's 12 L h s, against 312 TFLOP/s."""
    attention = 12 * GPT3_175B.layers * GPT3_175B.hidden * 2048
    assert round((GPT3_175B.flops_per_token(2048) - attention) * 300e9 / 1e23, 2) == 3.14
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
    assert counter.get_total_flops() == spec.layers * spec.block_forward_flops(3 * 32, 32) + spec.root_forward_flops(3 * 32)


def test_hsdp_keeps_most_traffic_on_nvlink():
    """64 GPUs in nodes of 8: ZeRO-3 over all 64 sends 3 Psi (less the root's second gather)
    x 63/64 over the network; sharding within the node sends it over NVLink, and the network
    carries only the all-reduce of each rank's shard, 2 x 7/8 x Psi/8."""
    psi, root, b = LLAMA3_8B.num_params(), LLAMA3_8B.root_params(), 2
    flat = traffic_per_gpu(LLAMA3_8B, 3, Layout(64, 8, 64))
    assert flat == {"nvlink": 0.0, "network": 63 / 64 * (3 * psi - root) * b}
    hsdp = traffic_per_gpu(LLAMA3_8B, 3, Layout(64, 8, 8))
    assert hsdp == {"nvlink": 7 / 8 * (3 * psi - root) * b, "network": 2 * 7 / 8 * psi / 8 * b}
    assert traffic_per_gpu(LLAMA3_8B, 0, Layout(64, 8, 64))["network"] == 2 * 63 / 64 * psi * b


def predict(hardware=A100_NODE, **changes):
    options = dict(world_size=64, gpus_per_node=8, stage=3, micro_batch=1, seq_len=8192,
                   activation_checkpointing="selective")
    return predict_step(LLAMA3_8B, hardware, **{**options, **changes})


def test_the_schedule_keeps_each_stream_in_order_and_adds_up():
    p = predict()
    for stream in ("compute", "communication"):
        spans = [s for s in p.timeline if s.stream == stream]
        assert all(a.end <= b.start + 1e-12 for a, b in zip(spans, spans[1:]))  # one at a time
    assert max(s.end for s in p.timeline) == p.step_s
    assert p.step_s == pytest.approx(p.compute_s + p.exposed_comm_s, rel=1e-12)
    assert p.compute_s <= p.step_s <= p.compute_s + p.comm_s


def test_prefetch_hides_gathers_and_hsdp_hides_more():
    with_prefetch, without = predict(), predict(prefetch=False)
    assert with_prefetch.exposed_comm_s < without.exposed_comm_s
    assert without.exposed_comm_s == pytest.approx(without.comm_s, rel=1e-9)  # nothing overlaps
    assert predict(shard_group=8).step_s < with_prefetch.step_s


def test_a_cpu_host_cannot_overlap():
    p = predict(hardware=H100_NODE.with_(overlap=False))
    assert p.step_s == pytest.approx(p.compute_s + p.comm_s, rel=1e-12)


@pytest.mark.parametrize("changes, message", [
    (dict(stage=0), "does not fit"),
    (dict(world_size=12), "not a multiple of gpus_per_node"),
    (dict(shard_group=3), "must divide world_size"),
    (dict(micro_batch=-1), "micro_batch must be a positive integer"),
    (dict(activation_checkpointing="some"), "activation_checkpointing one of"),
    (dict(stage=2, bucket_params=0), "bucket_params must be a positive integer"),
])
def test_bad_input_says_what_is_wrong(changes, message):
    with pytest.raises(ValueError, match=message):
        predict(**changes)


def test_buckets_cut_the_gradients_into_that_many_collectives():
    """ZeRO-2 with buckets of b elements: ceil(Psi / b) reduce-scatters and as many all-gathers,
    whose sizes add up to Psi (each priced as a ring over the node: its time gives its size back)."""
    hw, psi, b = H100_NODE, LLAMA3_8B.num_params(), 10**8
    p = predict(hardware=hw, world_size=8, stage=2, bucket_params=b)
    for what in ("reduce-scatter", "all-gather"):
        spans = [s for s in p.timeline if s.what == what]
        assert len(spans) == len(bucket_sizes(psi, b)) == -(-psi // b)
        sizes = [((s.end - s.start) - 7 * hw.intra_alpha) * hw.intra_bandwidth * 8 / 7 / 2 for s in spans]
        assert sum(sizes) == pytest.approx(psi, rel=1e-9)
    assert len([s for s in predict(world_size=8, stage=2).timeline if s.what == "reduce-scatter"]) == LLAMA3_8B.layers + 1


def test_a_reduce_scatter_costs_the_hardwares_multiple_of_an_all_reduce():
    """A ring's reduce-scatter is half an all-reduce (the default, 0.5, gives exactly the ring's
    formula); gloo's is an all-reduce and copies: a preset with 1.5 pays three times the ring's."""
    ring, gloo = (predict(hardware=H100_NODE.with_(reduce_scatter=r), world_size=8, stage=2) for r in (0.5, 1.5))
    seconds = lambda p: [s.end - s.start for s in p.timeline if s.what == "reduce-scatter"]
    size = LLAMA3_8B.block_params() * 2
    rounding = 4 * math.ulp(gloo.step_s)  # a span's end - start: each rounded at the step's scale
    exact = ring_seconds("reduce_scatter", size, 8, H100_NODE.intra_alpha, H100_NODE.intra_bandwidth)
    assert seconds(ring)[0] == pytest.approx(exact, rel=0, abs=rounding)
    *blocks, root = seconds(gloo)  # one per block, then the root's
    assert blocks == pytest.approx([3 * exact] * LLAMA3_8B.layers, rel=0, abs=rounding)
    assert root == pytest.approx(3 * seconds(ring)[-1], rel=0, abs=rounding)


def test_a_model_that_does_not_fit_can_still_be_priced_on_request():
    p = predict(stage=0, allow_oom=True)
    assert not p.fits and p.peak_memory_bytes > A100_NODE.memory_bytes


CALIBRATION = {"world_size": 2, "compute_seconds": 0.2, "optimizer_seconds": {"2": 0.01}, "backend": "gloo",
               "all_reduce": {"alpha": 3e-4, "beta": 1e-9}, "reduce_scatter_over_all_reduce": 1.4}


def test_the_timed_runs_are_predicted_with_their_own_buckets():
    """predict_runs tells each timed method its gradient buckets (ZeRO-2: zero_speed's, one
    reduce-scatter per 2^18 elements; our ZeRO-1: one; ZeRO-3: one per unit); naive: one per unit."""
    from zerobook.perfmodel.machine import ZERO2_BUCKET_NUMEL, predict_runs
    from zerobook.runs import zero_speed

    assert ZERO2_BUCKET_NUMEL == zero_speed.BUCKET_NUMEL
    config = GPTConfig(vocab=4096, hidden=256, layers=4, heads=4, seq_len=128)
    spec = course_gpt(config)
    calibration = {**CALIBRATION, "num_params": spec.num_params()}
    runs, naive = (predict_runs(calibration, spec, batch=4, seq_len=128, naive=flag) for flag in (False, True))
    count = lambda p: sum(s.what == "reduce-scatter" for s in p.timeline)
    assert count(runs["ZeRO-2"]) == len(bucket_sizes(spec.num_params(), ZERO2_BUCKET_NUMEL))
    assert (count(runs["ZeRO-1"]), count(runs["ZeRO-3"]), count(naive["ZeRO-2"])) == (1, 5, 5)
    assert runs["ZeRO-2"].comm_s > naive["ZeRO-2"].comm_s  # more latencies, and gloo's dearer reduce-scatter


def test_this_machines_preset_reproduces_what_was_calibrated():
    """machine_hardware turns runs.calibrate's numbers into a preset; predicting with it gives the
    calibrated compute and optimizer seconds back, and a ring time from the fitted alpha-beta."""
    from zerobook.perfmodel.machine import forward_flops, machine_hardware

    config = GPTConfig(vocab=4096, hidden=256, layers=4, heads=4, seq_len=128)
    spec, psi = course_gpt(config), measure.num_params(GPT(config))
    calibration = {**CALIBRATION, "num_params": psi}
    hw = machine_hardware(calibration, spec, batch=4, seq_len=128)
    p = predict_step(spec, hw, world_size=2, gpus_per_node=2, stage=1, micro_batch=4, seq_len=128, dtype="fp32")
    assert hw.peak_flops * 0.2 == pytest.approx(3 * forward_flops(spec, 512, 128), rel=1e-12)
    assert p.compute_s == pytest.approx(0.2 + 0.01, rel=1e-12)  # forward + backward, then the optimizer
    assert hw.overlap is False and hw.intra_bandwidth == pytest.approx(1e9)
    assert hw.reduce_scatter == 1.4  # the ratio it measured
