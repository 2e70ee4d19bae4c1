"""Interactive pictures: the ZeRO stage explorer and the step explorer.

`stage_explorer()` is self-contained HTML and JavaScript (no CDN, no kernel): it stays interactive in
the built book and in Jupyter. `stage_explorer_live()` is the ipywidgets version, computed by
`zerobook.memory` in the kernel. `step_explorer()` draws zerobook.perfmodel's predicted step for
the model, GPUs, N, sharding, batch and recomputation chosen in its menus, predicted in the page by
a JavaScript port of predict_step (zerobook/assets/perfmodel.js, tested equal to the Python);
`step_explorer_live()` is its ipywidgets twin, predicted in the kernel.
"""
from __future__ import annotations

import json
import math
import uuid
from importlib import resources

from zerobook import memory

DEVICES_GB = (80, 32)


class HTML:
    """Raw HTML that Jupyter and the book render as it is."""

    def __init__(self, html: str):
        self.html = html

    def _repr_html_(self) -> str:
        return self.html


def stage_explorer(num_params: float = 7.5e9, world_size: int = 64, stage: int = 0,
                   devices_gb=DEVICES_GB, recipe: memory.Recipe = memory.RECIPES["zero_paper"]) -> HTML:
    """Sliders for stage, N and Ψ: three stacked bands per GPU shrink as each is sharded."""
    memory.model_state_bytes(num_params, stage=stage, world_size=world_size, **recipe.sizes())
    options = "".join(f'<option value="{gb}">{gb} GB</option>' for gb in devices_gb)
    fills = {"__ID__": f"zb-explorer-{uuid.uuid4().hex[:8]}", "__STAGE__": str(stage),
             "__LOG2N__": str(round(math.log2(world_size))),
             "__LOG10PSI__": repr(math.log10(num_params)), "__DEVICE_OPTIONS__": options,
             "__BYTES__": json.dumps([recipe.param_bytes, recipe.grad_bytes, recipe.optimizer_bytes])}
    html = resources.files("zerobook").joinpath("assets/stage_explorer.html").read_text()
    for key, value in fills.items():
        html = html.replace(key, value)
    return HTML(html)


def summary(num_params: float, stage: int, world_size: int, device_gb: float) -> str:
    """The sentence both explorers print: bytes per GPU, by kind, and whether it fits."""
    held = memory.model_state_bytes(num_params, stage=stage, world_size=world_size)
    fits = "fits" if held.total <= device_gb * memory.GB else "does not fit"
    return (f"{held.total / memory.GB:.2f} GB per GPU = params {held.params / memory.GB:.2f} + grads "
            f"{held.grads / memory.GB:.2f} + optimizer {held.optimizer / memory.GB:.2f} GB: {fits} "
            f"in {device_gb:g} GB (model states only)")


def params_label(num_params: float) -> str:
    """A parameter count as a reader says it: 350M, 7.50B, 1.00T."""
    for scale, unit in ((1e12, "T"), (1e9, "B")):
        if num_params >= scale:
            return f"{num_params / scale:.2f}{unit}"
    return f"{num_params / 1e6:.0f}M"


def psi_choices(num_params: float, per_decade: int = 40) -> list[tuple[str, float]]:
    """(label, Ψ) from 10^8 to 10^12, evenly spaced in log, with `num_params` itself among them."""
    grid = {round(10 ** (8 + k / per_decade), -6) for k in range(4 * per_decade + 1)} | {float(num_params)}
    return [(params_label(psi), psi) for psi in sorted(grid)]


def stage_explorer_live(num_params: float = 7.5e9, world_size: int = 64, stage: int = 0):
    """The same explorer as ipywidgets: needs a running kernel (it calls zerobook.memory). The
    sliders read as numbers (Ψ "7.50B", N "64"), and start exactly at the values given."""
    import ipywidgets as w

    sizes = sorted({2 ** k for k in range(11)} | {world_size})
    controls = {"stage": w.IntSlider(value=stage, min=0, max=3, description="stage"),
                "n": w.SelectionSlider(options=[(f"{n:,}", n) for n in sizes], value=world_size, description="N"),
                "psi": w.SelectionSlider(options=psi_choices(num_params), value=float(num_params), description="Ψ"),
                "device_gb": w.Dropdown(options=list(DEVICES_GB), description="GB per GPU")}
    label = w.Label()

    def update(_=None):
        label.value = summary(controls["psi"].value, controls["stage"].value, controls["n"].value,
                              controls["device_gb"].value)

    for control in controls.values():
        control.observe(update, names="value")
    update()
    return w.VBox([*controls.values(), label])


def html_table(headers, rows, caption: str = "") -> HTML:
    """A plain HTML table of already-formatted cells (the book styles it like its own tables)."""
    from html import escape

    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return HTML(f'<table class="table">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


STEP_METHODS = {  # label -> (stage, prefetch, shard group: None for all ranks, "node" for each node's GPUs,
    # the updated weights' gather of stages 1-2: predict_step's param_gather)
    "DDP": (0, True, None, "after_step"), "ZeRO-1": (1, True, None, "after_step"),
    "ZeRO-1, gather overlapped (Megatron)": (1, True, None, "next_forward"), "ZeRO-2": (2, True, None, "after_step"),
    "ZeRO-2, gather overlapped (Megatron)": (2, True, None, "next_forward"),
    "ZeRO-3 + prefetch": (3, True, None, "after_step"), "ZeRO-3, no prefetch": (3, False, None, "after_step"),
    "HSDP (ZeRO-3 in each node)": (3, True, "node", "after_step"),
}
STEP_CHOICES = {  # each step explorer's menus: name -> options
    "per_node": [8, 4], "n": [8, 16, 64, 256, 1024], "batch": [1, 2, 4, 8], "seq": [2048, 4096, 8192],
    "recompute": ["none", "matmul inputs", "full"],  # predict_step's activation_checkpointing, "_" for " "
    "reduce": ["bf16", "fp32"], "micro": [1, 2, 4],  # predict_step's reduce_dtype, micro_batches
}
STEP_DEFAULTS = {"per_node": 8, "n": 64, "batch": 1, "seq": 8192, "recompute": "matmul inputs", "reduce": "bf16",
                 "micro": 1}


def step_arguments(method: str, n: int, per_node: int, batch: int, seq: int, recompute: str, reduce: str = "bf16",
                   micro: int = 1) -> dict:
    """The menus' choice as predict_step's keyword arguments (HSDP: one shard group per node); the
    gradients reduced in `reduce`, `micro` micro-batches of `batch` sequences per step."""
    if method not in STEP_METHODS:
        raise ValueError(f"method must be one of {list(STEP_METHODS)}, got {method!r}")
    stage, prefetch, group, gather = STEP_METHODS[method]
    return dict(world_size=n, gpus_per_node=per_node, stage=stage, prefetch=prefetch, micro_batch=batch,
                seq_len=seq, activation_checkpointing=None if recompute == "none" else recompute.replace(" ", "_"),
                shard_group=per_node if group == "node" and per_node < n else None, param_gather=gather,
                reduce_dtype=reduce, micro_batches=micro)


def step_explorer(model: str = "Llama 3 8B", hardware: str = "H100", method: str = "ZeRO-3 + prefetch",
                  **chosen) -> HTML:
    """Menus for the model, GPUs, GPUs per node, N, sharding, sequences per GPU, their length and
    the recomputation: the predicted step on its streams and the memory per GPU against the
    device's. Self-contained HTML: zerobook/assets/perfmodel.js (predict_step, line for line)
    predicts each choice in the page, so it needs neither kernel nor network. `chosen` overrides
    STEP_DEFAULTS (names as in STEP_CHOICES)."""
    from dataclasses import asdict

    from zerobook.hardware import PRESETS
    from zerobook.perfmodel import MODELS

    menus = {**STEP_DEFAULTS, **chosen}
    step_arguments(method, **menus)  # a clear error for a bad choice
    options = lambda values, picked: "".join(
        f'<option value="{v}"{" selected" if v == picked else ""}>{v}</option>' for v in values)
    fills = {"__ID__": f"zb-step-{uuid.uuid4().hex[:8]}", "__MODEL_OPTIONS__": options(MODELS, model),
             "__HARDWARE_OPTIONS__": options(PRESETS, hardware), "__METHOD_OPTIONS__": options(STEP_METHODS, method),
             **{f"__{k.upper()}_OPTIONS__": options(v, menus[k]) for k, v in STEP_CHOICES.items()},
             "__PERFMODEL_JS__": resources.files("zerobook").joinpath("assets/perfmodel.js").read_text(),
             "__DATA__": json.dumps({"models": {k: asdict(m) for k, m in MODELS.items()},
                                     "hardware": {k: asdict(h) for k, h in PRESETS.items()}, "methods": STEP_METHODS})}
    html = resources.files("zerobook").joinpath("assets/step_explorer.html").read_text()
    for key, value in fills.items():
        html = html.replace(key, value)
    return HTML(html)


def step_summary(p, memory_gb: float) -> str:
    """The sentence both step explorers print for a prediction."""
    fits = "fits" if p.fits else "does not fit"
    return (f"Step {p.step_s:.2f} s: computing {p.compute_s:.2f} s, waiting for communication "
            f"{p.exposed_comm_s:.2f} s; MFU {p.mfu:.2f} (predicted); {p.peak_memory_bytes / 1e9:.1f} GB per GPU "
            f"(predicted) — {fits} "
            f"in {memory_gb:.0f} GB.")


def memory_sentence(p) -> str:
    """The line both step explorers print under the step: the peak's terms, in GB."""
    terms = ", ".join(f"{term} {bytes_ / 1e9:.1f} GB" for term, bytes_ in p.memory.items())
    return f"Memory per GPU, left to right: {terms}."


def step_explorer_live():
    """The step explorer as ipywidgets, every input free (model, hardware, N, sharding, sequences
    per GPU and their length, recomputation): needs a running kernel (it calls predict_step)."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    from zerobook import plots
    from zerobook.hardware import PRESETS
    from zerobook.perfmodel import MODELS, predict_step

    controls = {"model": w.Dropdown(options=list(MODELS), value="Llama 3 8B", description="model"),
                "hardware": w.Dropdown(options=list(PRESETS), description="GPUs"),
                "per_node": w.Dropdown(options=STEP_CHOICES["per_node"], value=STEP_DEFAULTS["per_node"],
                                       description="per node"),
                "n": w.Dropdown(options=STEP_CHOICES["n"], value=STEP_DEFAULTS["n"], description="N"),
                "method": w.Dropdown(options=list(STEP_METHODS), value="ZeRO-3 + prefetch", description="sharding"),
                "batch": w.Dropdown(options=STEP_CHOICES["batch"], value=STEP_DEFAULTS["batch"], description="sequences"),
                "seq": w.Dropdown(options=STEP_CHOICES["seq"], value=STEP_DEFAULTS["seq"], description="tokens each"),
                "recompute": w.Dropdown(options=STEP_CHOICES["recompute"], value=STEP_DEFAULTS["recompute"],
                                        description="recompute"),
                "reduce": w.Dropdown(options=STEP_CHOICES["reduce"], value=STEP_DEFAULTS["reduce"],
                                     description="reduce in"),
                "micro": w.Dropdown(options=STEP_CHOICES["micro"], value=STEP_DEFAULTS["micro"],
                                    description="micro-batches")}
    label, terms, picture = w.Label(), w.Label(), w.Output()

    def update(_=None):
        c = {k: v.value for k, v in controls.items()}
        hardware, model = PRESETS[c.pop("hardware")], MODELS[c.pop("model")]
        p = predict_step(model, hardware, **step_arguments(**c), allow_oom=True)
        label.value, terms.value = step_summary(p, hardware.memory_bytes / 1e9), memory_sentence(p)
        with picture:
            picture.clear_output(wait=True)
            figure = plots.prediction_chart({c["method"]: p})
            display(figure)
            plt.close(figure)

    for control in controls.values():
        control.observe(update, names="value")
    update()
    return w.VBox([*controls.values(), label, terms, picture])
