"""The package code the core chapters (data parallelism to ZeRO-3, memory) draw and read with:
the bucket timeline and its run, the ring chart on a phone, the memory chapter's GPU sentences."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as mcolors  # noqa: E402
import pytest  # noqa: E402

import zerobook as zb  # noqa: E402
from zerobook.figures import buckets, ring, style  # noqa: E402
from zerobook.pages import gpu_findings, gpu_record  # noqa: E402

PHONE_PX = 360  # a 400 px phone's column, less the page's margins

RECORD = {  # what zerobook.runs.ddp_overlap reports, in seconds from backward's start
    "bucketed": {
        "grads": [0.001, 0.002, 0.004],
        "launched": [0.005, 0.0051],
        "done": [0.007, 0.009],
        "backward_end": 0.0045,
        "finished": 0.0095,
        "bucket_bytes": [1024, 512],
    },
    "overlap": {
        "grads": [0.001, 0.002, 0.004],
        "launched": [0.0021, 0.0041],
        "done": [0.005, 0.007],
        "backward_end": 0.0045,
        "finished": 0.0075,
        "bucket_bytes": [1024, 512],
    },
}


def test_the_bucket_timeline_is_legible_labelled_and_in_the_palette():
    fig = buckets.bucket_timeline_chart(RECORD)
    assert style.rendered_text_px(fig) >= 9
    assert all("(ms" in ax.get_xlabel() for ax in fig.axes[-1:])
    assert all(ax.get_ylabel() for ax in fig.axes)
    allowed = {mcolors.to_hex(c) for c in style.PALETTE.values()}
    used = {mcolors.to_hex(p.get_facecolor()) for ax in fig.axes for p in ax.patches}
    used |= {
        mcolors.to_hex(c)
        for ax in fig.axes
        for coll in ax.collections
        for c in coll.get_facecolor()
    }
    used |= {mcolors.to_hex(line.get_color()) for ax in fig.axes for line in ax.lines}
    assert used <= allowed, used - allowed
    bars = [len(coll.get_paths()) for ax in fig.axes for coll in ax.collections]
    assert sum(bars) == 4  # one bar per bucket and mode


def test_the_ring_steps_stay_legible_on_a_phone():
    world_size = 4
    traces = [
        [
            {"phase": phase, "step": step, "holding": [2**r] * world_size}
            for phase in ("reduce-scatter", "all-gather")
            for step in range(world_size - 1)
        ]
        for r in range(world_size)
    ]
    fig = ring.ring_steps_chart(traces)
    assert style.rendered_text_px(fig, column_px=PHONE_PX) >= 9
    titled = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titled[0] == "start" and len(titled) == 2 * (world_size - 1) + 1


def test_buckets_sent_after_backward_start_after_it_and_overlapped_ones_inside_it():
    run = zb.torchrun(
        "zerobook.runs.ddp_overlap", nproc=2, echo=False, args=["--steps", 2]
    )
    report = run.ranks[0]
    after, over = report["bucketed"], report["overlap"]
    assert len(after["launched"]) == len(over["launched"]) > 1
    assert all(t >= after["backward_end"] for t in after["launched"])
    assert all(t < over["backward_end"] for t in over["launched"])
    for record in (after, over):
        assert all(
            s <= e <= record["finished"]
            for s, e in zip(record["launched"], record["done"])
        )
        assert len(record["grads"]) > len(
            record["launched"]
        )  # several tensors a bucket


class Record:
    label = "measured on a test GPU"
    device = "NVIDIA H100 80GB HBM3"

    def __init__(self, sections):
        self.sections = sections

    def section(self, name):
        return self.sections.get(name)


def memory_section(reserved, allocated):
    cuda = {"reserved_peak": reserved, "allocated_peak": allocated}
    return {"2": {"methods": {"ddp": {"cuda": cuda}, "zero3": {"cuda": None}}}}


def test_fragmentation_is_reserved_over_allocated_at_the_peak(monkeypatch):
    monkeypatch.setattr(gpu_record, "latest", lambda **_: None)
    extra = gpu_findings.overheads(memory_section(110, 100))
    assert extra == [(2, "ddp", pytest.approx(0.1))]
    sentence = gpu_findings.fragmentation_sentence(Record({}), extra)
    assert "10.0% to 10.0% more" in sentence and "not measured yet" in sentence
    assert gpu_findings.overheads(None) == []
    assert "no GPU record" in gpu_findings.fragmentation_sentence(None, [])


def test_the_matmul_sentence_reads_the_record_or_says_there_is_none():
    assert gpu_findings.matmul_sentence(None) == gpu_record.MISSING
    sentence = gpu_findings.matmul_sentence(Record({"matmul": {"bf16": 600e12}}))
    assert "600 TFLOP/s" in sentence and "0.15 of the" in sentence
