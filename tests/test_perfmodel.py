"""zerobook.perfmodel: the shapes counted exactly (against released models, a paper's compute and
the course's own GPT measured by FlopCounterMode), the traffic formulas, the schedule's rules, and
clear errors for what it cannot price."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from zerobook import measure
from zerobook.hardware import A100_NODE, H100_NODE
from zerobook.models import GPT, GPTConfig
from zerobook.perfmodel import GPT3_175B, LLAMA3_8B, LLAMA3_70B, ModelSpec, predict_step
from zerobook.perfmodel.models import course_gpt
from zerobook.perfmodel.step import Layout, traffic_per_gpu


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
])
def test_bad_input_says_what_is_wrong(changes, message):
    with pytest.raises(ValueError, match=message):
        predict(**changes)


def test_a_model_that_does_not_fit_can_still_be_priced_on_request():
    p = predict(stage=0, allow_oom=True)
    assert not p.fits and p.peak_memory_bytes > A100_NODE.memory_bytes


def test_this_machines_preset_reproduces_what_was_calibrated():
    """machine_hardware turns runs.calibrate's numbers into a preset; predicting with it gives the
    calibrated compute and optimizer seconds back, and a ring time from the fitted alpha-beta."""
    from zerobook.perfmodel.machine import forward_flops, machine_hardware

    config = GPTConfig(vocab=4096, hidden=256, layers=4, heads=4, seq_len=128)
    spec, psi = course_gpt(config), measure.num_params(GPT(config))
    calibration = {"world_size": 2, "num_params": psi, "compute_seconds": 0.2, "optimizer_seconds": {"2": 0.01},
                   "all_reduce": {"alpha": 3e-4, "beta": 1e-9}}
    hw = machine_hardware(calibration, spec, batch=4, seq_len=128)
    p = predict_step(spec, hw, world_size=2, gpus_per_node=2, stage=1, micro_batch=4, seq_len=128, dtype="fp32")
    assert hw.peak_flops * 0.2 == pytest.approx(3 * forward_flops(spec, 512, 128), rel=1e-12)
    assert p.compute_s == pytest.approx(0.2 + 0.01, rel=1e-12)  # forward + backward, then the optimizer
    assert hw.overlap is False and hw.intra_bandwidth == pytest.approx(1e9)
