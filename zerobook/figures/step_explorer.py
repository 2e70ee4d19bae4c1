"""The step explorer: zerobook.perfmodel's predicted step for the model, GPUs, N, sharding, batch
and recomputation chosen in its menus, predicted in the page by a JavaScript port of predict_step
(zerobook/assets/perfmodel.js, tested equal to the Python); `step_explorer_live()` is its
ipywidgets twin, predicted in the kernel.
"""

from __future__ import annotations

import json
import uuid
from importlib import resources

from zerobook.figures.widgets import HTML

STEP_METHODS = {  # label -> (stage, prefetch, shard group: None for all ranks, "node" for each node's GPUs,
    # the updated weights' gather of stages 1-2: predict_step's param_gather)
    "DDP": (0, True, None, "after_step"),
    "ZeRO-1": (1, True, None, "after_step"),
    "ZeRO-1, gather overlapped (Megatron)": (1, True, None, "next_forward"),
    "ZeRO-2": (2, True, None, "after_step"),
    "ZeRO-2, gather overlapped (Megatron)": (2, True, None, "next_forward"),
    "ZeRO-3 + prefetch": (3, True, None, "after_step"),
    "ZeRO-3, no prefetch": (3, False, None, "after_step"),
    "HSDP (ZeRO-3 in each node)": (3, True, "node", "after_step"),
}

STEP_CHOICES = {  # each step explorer's menus: name -> options
    "per_node": [8, 4],
    "n": [8, 16, 64, 256, 1024],
    "batch": [1, 2, 4, 8],
    "seq": [2048, 4096, 8192],
    "recompute": [
        "none",
        "matmul inputs",
        "full",
    ],  # predict_step's activation_checkpointing, "_" for " "
    "reduce": ["bf16", "fp32"],
    "micro": [1, 2, 4],  # predict_step's reduce_dtype, micro_batches
}

STEP_DEFAULTS = {
    "per_node": 8,
    "n": 64,
    "batch": 1,
    "seq": 8192,
    "recompute": "matmul inputs",
    "reduce": "bf16",
    "micro": 1,
}


def step_arguments(
    method: str,
    n: int,
    per_node: int,
    batch: int,
    seq: int,
    recompute: str,
    reduce: str = "bf16",
    micro: int = 1,
) -> dict:
    """The menus' choice as predict_step's keyword arguments (HSDP: one shard group per node); the
    gradients reduced in `reduce`, `micro` micro-batches of `batch` sequences per step."""
    if method not in STEP_METHODS:
        raise ValueError(f"method must be one of {list(STEP_METHODS)}, got {method!r}")
    stage, prefetch, group, gather = STEP_METHODS[method]
    return dict(
        world_size=n,
        gpus_per_node=per_node,
        stage=stage,
        prefetch=prefetch,
        micro_batch=batch,
        seq_len=seq,
        activation_checkpointing=None
        if recompute == "none"
        else recompute.replace(" ", "_"),
        shard_group=per_node if group == "node" and per_node < n else None,
        param_gather=gather,
        reduce_dtype=reduce,
        micro_batches=micro,
    )


def step_explorer(
    model: str = "Llama 3 8B",
    hardware: str = "H100",
    method: str = "ZeRO-3 + prefetch",
    **chosen,
) -> HTML:
    """Menus for the model, GPUs, GPUs per node, N, sharding, sequences per GPU, their length and
    the recomputation: the predicted step on its streams and the memory per GPU against the
    device's. Self-contained HTML: zerobook/assets/perfmodel.js (predict_step, line for line)
    predicts each choice in the page, so it needs neither kernel nor network. `chosen` overrides
    STEP_DEFAULTS (names as in STEP_CHOICES)."""
    from dataclasses import asdict

    from zerobook.accounting.hardware import PRESETS
    from zerobook.perfmodel import MODELS

    menus = {**STEP_DEFAULTS, **chosen}
    step_arguments(method, **menus)  # a clear error for a bad choice
    options = lambda values, picked: "".join(
        f'<option value="{v}"{" selected" if v == picked else ""}>{v}</option>'
        for v in values
    )
    fills = {
        "__ID__": f"zb-step-{uuid.uuid4().hex[:8]}",
        "__MODEL_OPTIONS__": options(MODELS, model),
        "__HARDWARE_OPTIONS__": options(PRESETS, hardware),
        "__METHOD_OPTIONS__": options(STEP_METHODS, method),
        **{
            f"__{k.upper()}_OPTIONS__": options(v, menus[k])
            for k, v in STEP_CHOICES.items()
        },
        "__PERFMODEL_JS__": resources.files("zerobook")
        .joinpath("assets/perfmodel.js")
        .read_text(),
        "__DATA__": json.dumps(
            {
                "models": {k: asdict(m) for k, m in MODELS.items()},
                "hardware": {k: asdict(h) for k, h in PRESETS.items()},
                "methods": STEP_METHODS,
            }
        ),
    }
    html = resources.files("zerobook").joinpath("assets/step_explorer.html").read_text()
    for key, value in fills.items():
        html = html.replace(key, value)
    return HTML(html)


def step_summary(p, memory_gb: float) -> str:
    """The sentence both step explorers print for a prediction."""
    fits = "fits" if p.fits else "does not fit"
    return (
        f"Step {p.step_s:.2f} s: computing {p.compute_s:.2f} s, waiting for communication "
        f"{p.exposed_comm_s:.2f} s; MFU {p.mfu:.2f} (predicted); {p.peak_memory_bytes / 1e9:.1f} GB per GPU "
        f"(predicted) — {fits} "
        f"in {memory_gb:.0f} GB."
    )


def memory_sentence(p) -> str:
    """The line both step explorers print under the step: the peak's terms, in GB."""
    terms = ", ".join(
        f"{term} {bytes_ / 1e9:.1f} GB" for term, bytes_ in p.memory.items()
    )
    return f"Memory per GPU, left to right: {terms}."


def step_explorer_live():
    """The step explorer as ipywidgets, every input free (model, hardware, N, sharding, sequences
    per GPU and their length, recomputation): needs a running kernel (it calls predict_step)."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    from zerobook.figures import predictions
    from zerobook.accounting.hardware import PRESETS
    from zerobook.perfmodel import MODELS, predict_step

    menus = {  # name -> (options, chosen at first, label), in the order shown
        "model": (list(MODELS), "Llama 3 8B", "model"),
        "hardware": (list(PRESETS), next(iter(PRESETS)), "GPUs"),
        "per_node": (STEP_CHOICES["per_node"], STEP_DEFAULTS["per_node"], "per node"),
        "n": (STEP_CHOICES["n"], STEP_DEFAULTS["n"], "N"),
        "method": (list(STEP_METHODS), "ZeRO-3 + prefetch", "sharding"),
        "batch": (STEP_CHOICES["batch"], STEP_DEFAULTS["batch"], "sequences"),
        "seq": (STEP_CHOICES["seq"], STEP_DEFAULTS["seq"], "tokens each"),
        "recompute": (
            STEP_CHOICES["recompute"],
            STEP_DEFAULTS["recompute"],
            "recompute",
        ),
        "reduce": (STEP_CHOICES["reduce"], STEP_DEFAULTS["reduce"], "reduce in"),
        "micro": (STEP_CHOICES["micro"], STEP_DEFAULTS["micro"], "micro-batches"),
    }
    controls = {
        name: w.Dropdown(options=options, value=value, description=label)
        for name, (options, value, label) in menus.items()
    }
    label, terms, picture = w.Label(), w.Label(), w.Output()

    def update(_=None):
        c = {k: v.value for k, v in controls.items()}
        hardware, model = PRESETS[c.pop("hardware")], MODELS[c.pop("model")]
        p = predict_step(model, hardware, **step_arguments(**c), allow_oom=True)
        label.value, terms.value = (
            step_summary(p, hardware.memory_bytes / 1e9),
            memory_sentence(p),
        )
        with picture:
            picture.clear_output(wait=True)
            figure = predictions.prediction_chart({c["method"]: p})
            display(figure)
            plt.close(figure)

    for control in controls.values():
        control.observe(update, names="value")
    update()
    return w.VBox([*controls.values(), label, terms, picture])
