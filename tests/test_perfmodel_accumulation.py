"""The step model's gradient reductions and micro-batches (issue 44): the reductions' dtype, k
micro-batches per step and when each stage syncs, in predict_step, T* and traffic_per_gpu."""

import pytest

from zerobook.accounting.hardware import A100_NODE, H100_NODE
from test_perfmodel import predict as llama_8b_step
from zerobook.perfmodel import LLAMA3_8B, critical_tokens_per_gpu
from zerobook.perfmodel.collectives import collective_seconds
from zerobook.perfmodel.accumulation import GRAD_SYNC, grad_syncs
from zerobook.perfmodel.step import Layout
from zerobook.perfmodel.traffic import traffic_per_gpu

BLOCKS = LLAMA3_8B.layers


def predict(hardware=H100_NODE, **changes):
    """test_perfmodel's Llama 3 8B step on 64 GPUs, on H100s, whether it fits or not."""
    return llama_8b_step(hardware, allow_oom=True, **changes)


def spans(p, what):
    return [s for s in p.timeline if s.what == what]


def test_gradients_reduced_in_fp32_send_twice_the_bytes_and_the_weights_do_not_change():
    """reduce_dtype="fp32": each reduce-scatter is priced at 4 bytes per element (the same
    collective_seconds as a bf16 one of twice the elements), each all-gather as before; the
    step's communication grows, and T* by exactly (2 + 2 + 4) / (3 x 2) = 4/3."""
    bf16, fp32 = predict(), predict(reduce_dtype="fp32")
    block = LLAMA3_8B.block_params()
    rs = collective_seconds(
        "reduce_scatter", 4 * block, world_size=64, gpus_per_node=8, hardware=H100_NODE
    )
    blocks_rs = [s for s in spans(fp32, "reduce-scatter") if s.unit != "root"]
    assert all(s.end - s.start == pytest.approx(rs, rel=1e-12) for s in blocks_rs)
    gathers = [s.end - s.start for s in spans(bf16, "all-gather")]
    assert [s.end - s.start for s in spans(fp32, "all-gather")] == gathers
    assert fp32.comm_s > bf16.comm_s and fp32.step_s >= bf16.step_s
    assert predict(dtype="fp32").comm_s > fp32.comm_s  # weights in fp32 too: more still
    for hw in (H100_NODE, A100_NODE):
        for n in (8, 64, 1024):
            star = lambda **o: critical_tokens_per_gpu(
                hw, world_size=n, gpus_per_node=8, **o
            )  # noqa: E731
            assert star(reduce_bytes=4) == pytest.approx(4 / 3 * star(), rel=1e-12)


def test_hsdp_all_reduces_the_replicas_in_the_reduction_dtype():
    bf16, fp32 = (predict(shard_group=8, reduce_dtype=d) for d in ("bf16", "fp32"))
    across = lambda p: [s.end - s.start for s in spans(p, "all-reduce (replicas)")]  # noqa: E731
    assert len(across(fp32)) == BLOCKS + 1
    assert all(a > b for a, b in zip(across(fp32), across(bf16)))


def test_each_stage_syncs_as_its_software_ships_it_unless_told():
    """DDP (no_sync) and DeepSpeed's ZeRO-1 reduce once per step; DeepSpeed's ZeRO-2 and FSDP2
    every micro-batch; grad_sync overrides; with one micro-batch every stage reduces once."""
    assert GRAD_SYNC == {0: "last", 1: "last", 2: "every", 3: "every"}
    assert grad_syncs(0, 4) == grad_syncs(3, 4, "last") == [False] * 3 + [True]
    assert grad_syncs(2, 3) == grad_syncs(1, 3, "every") == [True] * 3
    assert all(grad_syncs(s, 1) == [True] for s in range(4))


@pytest.mark.parametrize("sync", ["every", "last"])
def test_zero3_gathers_in_every_micro_batch_and_reduces_as_it_syncs(sync):
    """k micro-batches: k x (the root, then every block twice) all-gathers, the reduce-scatters
    of one micro-batch k times or once; the timeline's collectives carry what traffic_per_gpu
    counts; MFU and tokens per second count every micro-batch's tokens."""
    k = 3
    one, many = predict(), predict(micro_batches=k, grad_sync=sync)
    assert len(spans(many, "all-gather")) == k * len(spans(one, "all-gather"))
    assert len(spans(one, "all-gather")) == 1 + 2 * BLOCKS
    syncs = k if sync == "every" else 1
    assert len(spans(many, "reduce-scatter")) == syncs * (BLOCKS + 1)
    assert len(spans(many, "optimizer step")) == 1
    optimizer = [s.end - s.start for s in spans(one, "optimizer step")][0]
    assert many.compute_s == pytest.approx(
        k * (one.compute_s - optimizer) + optimizer, rel=1e-9
    )
    assert many.tokens_per_second == pytest.approx(k * 8192 / many.step_s, rel=1e-12)
    layout, psi = Layout(64, 8, 64), LLAMA3_8B.num_params()
    sent = traffic_per_gpu(LLAMA3_8B, 3, layout, micro_batches=k, grad_sync=sync)
    alone = traffic_per_gpu(LLAMA3_8B, 3, layout)
    rs = (
        traffic_per_gpu(LLAMA3_8B, 2, layout)["network"] / 2
    )  # one reduce-scatter of Psi
    assert sent["network"] == pytest.approx(
        k * (alone["network"] - rs) + syncs * rs, rel=1e-12
    )
    waiting = many.memory.get("accumulated gradients", 0)
    assert waiting == (
        2 * psi if sync == "last" else 0
    )  # unsharded, bf16, until the last


def test_stages_0_to_2_gather_and_reduce_once_per_step_where_they_accumulate():
    """DDP and ZeRO-1 accumulate (one reduction per step), ZeRO-2 reduce-scatters every
    micro-batch; ZeRO-1/2 gather the updated weights once, after the step or in the first
    micro-batch's forward (Megatron)."""
    for stage, reductions in ((0, 1), (1, 1), (2, 4)):
        kind = "all-reduce" if stage == 0 else "reduce-scatter"
        p = predict(stage=stage, world_size=8, micro_batches=4, bucket_params=10**8)
        one = predict(stage=stage, world_size=8, bucket_params=10**8)
        assert len(spans(p, kind)) == reductions * len(spans(one, kind))
        if stage:
            ahead = predict(
                stage=stage, world_size=8, micro_batches=4, param_gather="next_forward"
            )
            assert len(spans(ahead, "all-gather")) == 1 + BLOCKS
            assert len(spans(p, "all-gather")) == len(spans(one, "all-gather"))
    assert (
        "accumulated gradients"
        in predict(stage=2, world_size=8, micro_batches=2, grad_sync="last").memory
    )


def test_t_star_per_step_grows_with_the_micro_batches():
    """Every micro-batch gathers again and must hide its own traffic: a step of k micro-batches
    needs k x T*; the model's exposed share at k micro-batches of T tokens equals one's of T."""
    star = lambda k: critical_tokens_per_gpu(  # noqa: E731
        H100_NODE, world_size=64, gpus_per_node=8, micro_batches=k
    )
    assert star(4) == pytest.approx(4 * star(1), rel=1e-12)
    one, four = predict(micro_batch=1), predict(micro_batch=1, micro_batches=4)
    share = lambda p: p.exposed_comm_s / p.step_s  # noqa: E731
    assert share(four) == pytest.approx(share(one), abs=0.02)
    assert share(predict(micro_batch=4)) < share(
        four
    )  # the same tokens in one micro-batch hide more


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(micro_batches=0), "micro_batches must be a positive integer"),
        (dict(grad_sync="sometimes"), "grad_sync must be one of"),
        (dict(reduce_dtype="int8"), "reduce_dtype"),
    ],
)
def test_bad_accumulation_inputs_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        predict(**bad)
    with pytest.raises(ValueError, match="micro_batches must be a positive integer"):
        critical_tokens_per_gpu(
            H100_NODE, world_size=8, gpus_per_node=8, micro_batches=0
        )
