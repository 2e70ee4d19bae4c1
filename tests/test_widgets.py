"""The stage explorer: the same numbers as zerobook.memory, live (ipywidgets) and in a browser."""
import pytest

from browser import driver
from zerobook import memory, widgets


def test_live_explorer_follows_its_sliders():
    box = widgets.stage_explorer_live(num_params=7.5e9, world_size=64, stage=0)
    stage, log2n, log10psi, device, label = box.children
    assert label.value.startswith("120.00 GB per GPU") and "does not fit in 80 GB" in label.value
    stage.value = 3
    assert label.value == widgets.summary(7.5e9, 3, 64, 80)
    assert label.value.startswith("1.88 GB per GPU")


def test_explorer_html_is_self_contained():
    html = widgets.stage_explorer()._repr_html_()
    assert "<script>" in html and "http" not in html.replace("http://www.w3.org/2000/svg", "")
    with pytest.raises(ValueError, match="world_size"):
        widgets.stage_explorer(world_size=0)


def read(browser, root_id):
    root = browser.find_element("id", root_id)
    rects = browser.execute_script(
        "return [...arguments[0].querySelectorAll('rect[data-kind=optimizer]')].map(r => +r.getAttribute('height'))", root)
    return float(root.get_attribute("data-total-bytes")), rects, root


def test_moving_the_stage_slider_in_chromium_redraws_with_the_calculators_numbers(tmp_path):
    page = tmp_path / "explorer.html"
    html = widgets.stage_explorer(num_params=7.5e9, world_size=64, stage=0)._repr_html_()
    page.write_text(f"<!doctype html><html><body>{html}</body></html>")
    root_id = html.split('id="', 1)[1].split('"', 1)[0]
    browser = driver(tmp_path / "profile")
    try:
        browser.get(page.as_uri())
        total, bars, root = read(browser, root_id)
        assert total == pytest.approx(memory.model_state_bytes(7.5e9, stage=0, world_size=64).total, rel=1e-12)
        slider = root.find_element("css selector", "[data-role=stage]")
        for stage in (1, 2, 3):
            slider.send_keys("\ue014")  # the right-arrow key, as a reader would press it
            new_total, new_bars, _ = read(browser, root_id)
            expected = memory.model_state_bytes(7.5e9, stage=stage, world_size=64).total
            assert new_total == pytest.approx(expected, rel=1e-12)
            assert new_total < total
            total = new_total
        assert new_bars[0] < bars[0]  # the optimizer band collapsed
        assert "fits in 80.0 GB" in root.find_element("css selector", "[data-out=summary]").text
        logs = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs
    finally:
        browser.quit()


def embedded_steps(html: str) -> dict:
    import json

    return json.loads(html.split("const STEPS = ", 1)[1].split(";  //", 1)[0])


def test_the_step_explorer_embeds_exactly_what_predict_step_gives():
    from zerobook.hardware import H100_NODE
    from zerobook.perfmodel import LLAMA3_8B, predict_step

    html = widgets.step_explorer()._repr_html_()
    assert "<script>" in html and "http" not in html.replace("http://www.w3.org/2000/svg", "")
    steps = embedded_steps(html)
    assert len(steps) == len(widgets.STEP_METHODS) * 2 * 2
    p = predict_step(LLAMA3_8B, H100_NODE, world_size=64, gpus_per_node=8, stage=3, micro_batch=4, seq_len=8192,
                     activation_checkpointing="selective", shard_group=8, allow_oom=True)
    hsdp = steps["HSDP (ZeRO-3 in each node)|64|4"]
    assert (hsdp["step_s"], hsdp["exposed_comm_s"], hsdp["fits"]) == (p.step_s, p.exposed_comm_s, p.fits)
    assert len(hsdp["spans"]) == len(p.timeline)
    with pytest.raises(ValueError, match="method"):
        widgets.step_explorer(method="ZeRO-4")


def test_choosing_another_sharding_in_chromium_redraws_the_predicted_step(tmp_path):
    from selenium.webdriver.support.ui import Select

    html = widgets.step_explorer()._repr_html_()
    steps = embedded_steps(html)
    page = tmp_path / "steps.html"
    page.write_text(f"<!doctype html><html><body>{html}</body></html>")
    root_id = html.split('id="', 1)[1].split('"', 1)[0]
    browser = driver(tmp_path / "profile")
    try:
        browser.get(page.as_uri())
        root = browser.find_element("id", root_id)
        assert float(root.get_attribute("data-step-s")) == steps["ZeRO-3 + prefetch|64|1"]["step_s"]
        Select(root.find_element("css selector", "[data-role=method]")).select_by_value("ZeRO-3, no prefetch")
        slow = steps["ZeRO-3, no prefetch|64|1"]
        assert float(root.get_attribute("data-step-s")) == slow["step_s"]
        assert float(root.get_attribute("data-exposed-s")) == slow["exposed_comm_s"]
        bars = root.find_elements("css selector", "rect[data-stream=communication]")
        assert len(bars) == sum(1 for s in slow["spans"] if s[0] == "communication")
        assert f"{slow['step_s']:.2f} s" in root.find_element("css selector", "[data-out=summary]").text
        logs = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs
    finally:
        browser.quit()


def test_the_live_step_explorer_follows_its_controls():
    from zerobook.hardware import A100_NODE
    from zerobook.perfmodel import LLAMA3_70B, predict_step

    box = widgets.step_explorer_live()
    controls = {c.description: c for c in box.children if hasattr(c, "description") and c.description}
    label = box.children[-2]
    first = label.value
    controls["model"].value, controls["GPUs"].value, controls["recompute"].value = "Llama 3 70B", "A100", "full"
    p = predict_step(LLAMA3_70B, A100_NODE, world_size=64, gpus_per_node=8, stage=3, micro_batch=1, seq_len=8192,
                     activation_checkpointing="full", allow_oom=True)
    assert label.value == widgets.step_summary(p, 80) != first
