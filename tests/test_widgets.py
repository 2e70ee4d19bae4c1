"""The stage and step explorers: the same numbers as zerobook.accounting.memory and zerobook.perfmodel, live (ipywidgets) and in a browser."""

from types import SimpleNamespace

import pytest

from browser import driver
from zerobook.accounting import memory
from zerobook.figures import step_explorer, widgets


def test_live_explorer_follows_its_sliders():
    box = widgets.stage_explorer_live(num_params=7.5e9, world_size=64, stage=0)
    stage, n, psi, device, label = box.children
    assert (
        label.value.startswith("120.00 GB per GPU")
        and "does not fit in 80 GB" in label.value
    )
    assert (psi.label, psi.value, n.label, n.value) == (
        "7.50B",
        7.5e9,
        "64",
        64,
    )  # read as numbers
    stage.value = 3
    assert label.value == widgets.summary(7.5e9, 3, 64, 80)
    assert label.value.startswith("1.88 GB per GPU")
    n.value = 1024
    assert label.value == widgets.summary(7.5e9, 3, 1024, 80)


def test_parameter_counts_are_labelled_as_a_reader_says_them():
    assert [widgets.params_label(x) for x in (3.5e8, 7.5e9, 1.75e11, 1e12)] == [
        "350M",
        "7.50B",
        "175.00B",
        "1.00T",
    ]
    choices = widgets.psi_choices(7.5e9)
    assert (choices[0][1], choices[-1][1]) == (1e8, 1e12) and (
        "7.50B",
        7.5e9,
    ) in choices


def test_explorer_html_is_self_contained():
    html = widgets.stage_explorer()._repr_html_()
    assert "<script>" in html and "http" not in html.replace(
        "http://www.w3.org/2000/svg", ""
    )
    with pytest.raises(ValueError, match="world_size"):
        widgets.stage_explorer(world_size=0)


def read(browser, root_id):
    root = browser.find_element("id", root_id)
    rects = browser.execute_script(
        "return [...arguments[0].querySelectorAll('rect[data-kind=optimizer]')].map(r => +r.getAttribute('height'))",
        root,
    )
    return float(root.get_attribute("data-total-bytes")), rects, root


def stacked(browser, root) -> float:
    """The height of the first GPU's bar: its three bands stacked (the first of each kind)."""
    return browser.execute_script(
        "return ['params', 'grads', 'optimizer'].map(k => +arguments[0].querySelector(`rect[data-kind=${k}]`)"
        ".getAttribute('height')).reduce((a, b) => a + b)",
        root,
    )


def test_moving_the_stage_slider_in_chromium_redraws_with_the_calculators_numbers(
    tmp_path,
):
    page = tmp_path / "explorer.html"
    html = widgets.stage_explorer(
        num_params=7.5e9, world_size=64, stage=0
    )._repr_html_()
    page.write_text(f"<!doctype html><html><body>{html}</body></html>")
    root_id = html.split('id="', 1)[1].split('"', 1)[0]
    browser = driver(tmp_path / "profile")
    try:
        browser.get(page.as_uri())
        total, bars, root = read(browser, root_id)
        stacked_at_stage_0 = stacked(browser, root)
        assert total == pytest.approx(
            memory.model_state_bytes(7.5e9, stage=0, world_size=64).total, rel=1e-12
        )
        slider = root.find_element("css selector", "[data-role=stage]")
        for stage in (1, 2, 3):
            slider.send_keys(
                "\ue014"
            )  # the right-arrow key, as a reader would press it
            new_total, new_bars, _ = read(browser, root_id)
            expected = memory.model_state_bytes(7.5e9, stage=stage, world_size=64).total
            assert new_total == pytest.approx(expected, rel=1e-12)
            assert new_total < total
            total = new_total
        # the axis follows the data: stage 3's 1.9 GB fills as much of it as DDP's 120 GB did
        assert stacked(browser, root) == pytest.approx(stacked_at_stage_0, rel=1e-9)
        assert new_bars[0] / stacked(browser, root) == pytest.approx(
            12 / 16
        )  # the optimizer's share
        assert "off the scale" in root.text
        assert (
            "fits in 80.0 GB"
            in root.find_element("css selector", "[data-out=summary]").text
        )
        logs = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs
    finally:
        browser.quit()


def every_step_choice():
    """Every combination of the step explorer's menus: (model, hardware, step_arguments' inputs)."""
    import itertools

    from zerobook.accounting.hardware import PRESETS
    from zerobook.perfmodel import MODELS

    menus = [
        list(MODELS),
        list(PRESETS),
        list(step_explorer.STEP_METHODS),
        *step_explorer.STEP_CHOICES.values(),
    ]
    names = ["model", "hardware", "method", *step_explorer.STEP_CHOICES]
    return [dict(zip(names, values)) for values in itertools.product(*menus)]


def python_prediction(choice: dict, spans: bool = True) -> dict:
    """predict_step's numbers (and spans) for one choice, as the page's JavaScript returns them."""
    from zerobook.accounting.hardware import PRESETS
    from zerobook.perfmodel import MODELS, predict_step

    c = dict(choice)
    model, hardware = MODELS[c.pop("model")], PRESETS[c.pop("hardware")]
    sync = {k: c.pop(k) for k in ("grad_sync", "allocator_margin") if k in c}
    p = predict_step(
        model, hardware, **step_explorer.step_arguments(**c), **sync, allow_oom=True
    )
    keys = (
        "step_s",
        "compute_s",
        "comm_s",
        "exposed_comm_s",
        "mfu",
        "peak_memory_bytes",
        "fits",
    )
    timeline = (
        [[s.stream, s.what, s.unit, s.start, s.end] for s in p.timeline]
        if spans
        else len(p.timeline)
    )
    return {
        **{k: getattr(p, k) for k in keys},
        "memory": p.memory,
        "timeline": timeline,
    }


JS_PREDICTIONS = """
const [choices, data] = arguments;
return choices.map((c) => {
  const m = data.models[c.model], hw = data.hardware[c.hardware];
  const [stage, prefetch, group, gather] = data.methods[c.method];
  const p = window.zerobook.predictStep(m, hw, {world_size: c.n, gpus_per_node: c.per_node, stage, prefetch,
    micro_batch: c.batch, seq_len: c.seq, activation_checkpointing: c.recompute === "none" ? null : c.recompute.replace(" ", "_"),
    shard_group: group === "node" && c.per_node < c.n ? c.per_node : null, param_gather: gather,
    reduce_dtype: c.reduce, micro_batches: c.micro, grad_sync: c.grad_sync || null,
    allocator_margin: c.allocator_margin ?? undefined});
  const timeline = p.timeline.map((s) => [s.stream, s.what, s.unit, s.start, s.end]);
  return {step_s: p.step_s, compute_s: p.compute_s, comm_s: p.comm_s, exposed_comm_s: p.exposed_comm_s, mfu: p.mfu,
          peak_memory_bytes: p.peak_memory_bytes, fits: p.fits, memory: p.memory,
          timeline: c.spans ? timeline : timeline.length};
});
"""


def explorer_page(tmp_path, **chosen):
    """The static step explorer on a page of its own: (its file, its root element's id, its data)."""
    import json

    html = step_explorer.step_explorer(**chosen)._repr_html_()
    page = tmp_path / "steps.html"
    page.write_text(f"<!doctype html><html><body>{html}</body></html>")
    data = json.loads(html.split("const DATA = ", 1)[1].split(";  //", 1)[0])
    return page, html.split('id="', 1)[1].split('"', 1)[0], data


def test_the_step_explorer_is_self_contained_and_refuses_a_bad_choice():
    html = step_explorer.step_explorer()._repr_html_()
    assert "<script>" in html and "http" not in html.replace(
        "http://www.w3.org/2000/svg", ""
    )
    assert "predictStep" in html
    with pytest.raises(ValueError, match="method"):
        step_explorer.step_explorer(method="ZeRO-4")


def test_the_pages_javascript_predicts_the_same_doubles_as_predict_step(tmp_path):
    """perfmodel.js against predict_step on every 149th combination of the menus (149 is prime to
    every menu's length, so the sample walks through each menu's options), on some of them with
    the gradients synced every micro-batch or on the last (against the stage's default), with the
    allocator's margin at the measured ends, and on a
    gloo-like preset (reduce-scatter 1.4 x an all-reduce, no overlap): the same sums in the same
    order, so equal numbers; every 10th of them compared span for span."""
    from zerobook.accounting.hardware import PRESETS

    page, _, data = explorer_page(tmp_path)
    data["hardware"]["gloo-like"] = {
        **data["hardware"]["A100"],
        "reduce_scatter": 1.4,
        "overlap": False,
    }
    sample = every_step_choice()[::149]
    # the gradients' sync against each stage's default (no menu on the page), on 2 and 4 micro-batches
    synced = [
        dict(c, grad_sync=sync)
        for c in sample[::7]
        if c["micro"] > 1
        for sync in ("every", "last")
    ]
    margins = [dict(c, allocator_margin=m) for c in sample[::50] for m in (0.047, 0.70)]
    choices = [
        dict(c, spans=k % 10 == 0)
        for k, c in enumerate(
            sample
            + synced
            + margins
            + [dict(c, hardware="gloo-like") for c in sample[:50]]
        )
    ]
    PRESETS["gloo-like"] = PRESETS["A100"].with_(reduce_scatter=1.4, overlap=False)
    browser = driver(tmp_path / "profile")
    try:
        browser.get(page.as_uri())
        got = browser.execute_script(JS_PREDICTIONS, choices, data)
        expected = [
            python_prediction({k: v for k, v in c.items() if k != "spans"}, c["spans"])
            for c in choices
        ]
        for choice, js, py in zip(choices, got, expected):
            assert js == py, choice
    finally:
        PRESETS.pop("gloo-like")
        browser.quit()


def test_choosing_in_chromium_redraws_the_predicted_step_and_memory(tmp_path):
    from selenium.webdriver.support.ui import Select

    from zerobook.accounting.hardware import A100_NODE

    page, root_id, _ = explorer_page(tmp_path)
    start = python_prediction(
        dict(
            model="Llama 3 8B",
            hardware="H100",
            method="ZeRO-3 + prefetch",
            **step_explorer.STEP_DEFAULTS,
        )
    )
    browser = driver(tmp_path / "profile")
    try:
        browser.get(page.as_uri())
        root = browser.find_element("id", root_id)
        assert float(root.get_attribute("data-step-s")) == start["step_s"]
        choose = lambda role, value: Select(
            root.find_element("css selector", f"[data-role={role}]")
        ).select_by_value(value)
        for role, value in (
            ("model", "Llama 3 70B"),
            ("hardware", "A100"),
            ("recompute", "full"),
            ("method", "ZeRO-3, no prefetch"),
        ):
            choose(role, value)
        chosen = python_prediction(
            dict(
                model="Llama 3 70B",
                hardware="A100",
                method="ZeRO-3, no prefetch",
                **{**step_explorer.STEP_DEFAULTS, "recompute": "full"},
            )
        )
        assert (
            float(root.get_attribute("data-step-s"))
            == chosen["step_s"]
            != start["step_s"]
        )
        assert float(root.get_attribute("data-exposed-s")) == chosen["exposed_comm_s"]
        bars = root.find_elements("css selector", "rect[data-stream=communication]")
        assert len(bars) == sum(
            1 for s in chosen["timeline"] if s[0] == "communication"
        )
        terms = root.find_elements("css selector", "rect[data-term]")
        assert [t.get_attribute("data-term") for t in terms] == list(chosen["memory"])
        legend = root.find_element("css selector", "[data-out=memory]").text
        assert legend == step_explorer.memory_sentence(
            SimpleNamespace(memory=chosen["memory"])
        )  # the live one's words
        summary = root.find_element("css selector", "[data-out=summary]").text
        assert (
            f"Step {chosen['step_s']:.2f} s" in summary
            and f"in {A100_NODE.memory_bytes / 1e9:.0f} GB" in summary
        )
        choose("model", "GPT-3 175B")
        choose("n", "8")
        assert (
            root.get_attribute("data-fits") == "false"
        )  # 175B on 8 GPUs: does not fit, and says so
        assert (
            "does not fit"
            in root.find_element("css selector", "[data-out=summary]").text
        )
        logs = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs
    finally:
        browser.quit()


def test_the_live_step_explorer_follows_its_controls():
    from zerobook.accounting.hardware import A100_NODE
    from zerobook.perfmodel import LLAMA3_70B, predict_step

    box = step_explorer.step_explorer_live()
    controls = {
        c.description: c
        for c in box.children
        if hasattr(c, "description") and c.description
    }
    label, terms = box.children[-3:-1]
    first = label.value
    controls["model"].value, controls["GPUs"].value, controls["recompute"].value = (
        "Llama 3 70B",
        "A100",
        "full",
    )
    controls["per node"].value = 4
    controls["sharding"].value = "HSDP (ZeRO-3 in each node)"
    p = predict_step(
        LLAMA3_70B,
        A100_NODE,
        world_size=64,
        gpus_per_node=4,
        stage=3,
        micro_batch=1,
        seq_len=8192,
        activation_checkpointing="full",
        shard_group=4,
        allow_oom=True,
    )
    assert label.value == step_explorer.step_summary(p, 80) != first
    assert terms.value == step_explorer.memory_sentence(p)


def test_the_pages_collectives_are_nccl_choice_to_the_bit(tmp_path):
    """perfmodel.js's collectiveSeconds against collective_seconds for every kind, sizes from
    4 B to 16 GiB, one node to 2,048 GPUs, whole nodes and one rank per node, on each preset,
    one with in-network reduction across nodes (SHARP) and a calibrated alpha-beta host: every
    algorithm and protocol NCCL's tuner offers, the same doubles."""
    from dataclasses import asdict

    from zerobook.accounting.hardware import PRESETS
    from zerobook.perfmodel import collective_seconds, nccl_choice

    page, _, _ = explorer_page(tmp_path)
    presets = {
        **PRESETS,
        "sharp": PRESETS["H100"].with_(sharp=True),
        "host": PRESETS["A100"].with_(
            generation=None, intra_alpha=3e-5, inter_alpha=9e-5
        ),
    }
    cases = [
        (name, kind, 4**e, n, k)
        for name in presets
        for kind in ("all_reduce", "all_gather", "reduce_scatter")
        for e in range(1, 18)
        for n, k in ((8, 8), (16, 8), (64, 8), (2048, 8), (8, 1), (128, 1))
    ]
    browser = driver(tmp_path / "profile")
    try:
        browser.get(page.as_uri())
        got = browser.execute_script(
            "const [cases, hw] = arguments; return cases.map(([name, kind, size, n, k]) =>"
            " window.zerobook.collectiveSeconds(kind, size, n, k, hw[name]));",
            cases,
            {name: asdict(h) for name, h in presets.items()},
        )
    finally:
        browser.quit()
    expected = [
        collective_seconds(
            kind, size, world_size=n, gpus_per_node=k, hardware=presets[name]
        )
        for name, kind, size, n, k in cases
    ]
    assert got == expected
    algorithms = {
        nccl_choice(kind, size, world_size=n, gpus_per_node=k, hardware=presets[name])[
            :2
        ]
        for name, kind, size, n, k in cases
    }
    assert {a for a, _ in algorithms} == {
        "ring",
        "tree",
        "nvls",
        "nvls_tree",
        "collnet",
    }
    assert {p for _, p in algorithms} == {"LL", "LL128", "Simple", "alpha-beta"}
