"""Interactive pictures of memory: the ZeRO stage explorer, and HTML tables.

`stage_explorer()` is self-contained HTML and JavaScript (no CDN, no kernel): it stays interactive in
the built book and in Jupyter. `stage_explorer_live()` is the ipywidgets version, computed by
`zerobook.accounting.memory` in the kernel. The step explorer is zerobook.figures.step_explorer.
"""

from __future__ import annotations

import json
import math
import uuid
from importlib import resources

from zerobook.accounting import memory, recipes

DEVICES_GB = (80, 32)


class HTML:
    """Raw HTML that Jupyter and the book render as it is."""

    def __init__(self, html: str):
        self.html = html

    def _repr_html_(self) -> str:
        return self.html


def stage_explorer(
    num_params: float = 7.5e9,
    world_size: int = 64,
    stage: int = 0,
    devices_gb=DEVICES_GB,
    recipe: recipes.Recipe = recipes.RECIPES["zero_paper"],
) -> HTML:
    """Sliders for stage, N and Ψ: three stacked bands per GPU shrink as each is sharded."""
    memory.model_state_bytes(
        num_params, stage=stage, world_size=world_size, **recipe.sizes()
    )
    options = "".join(f'<option value="{gb}">{gb} GB</option>' for gb in devices_gb)
    fills = {
        "__ID__": f"zb-explorer-{uuid.uuid4().hex[:8]}",
        "__STAGE__": str(stage),
        "__LOG2N__": str(round(math.log2(world_size))),
        "__LOG10PSI__": repr(math.log10(num_params)),
        "__DEVICE_OPTIONS__": options,
        "__BYTES__": json.dumps(
            [recipe.param_bytes, recipe.grad_bytes, recipe.optimizer_bytes]
        ),
    }
    html = (
        resources.files("zerobook").joinpath("assets/stage_explorer.html").read_text()
    )
    for key, value in fills.items():
        html = html.replace(key, value)
    return HTML(html)


def summary(num_params: float, stage: int, world_size: int, device_gb: float) -> str:
    """The sentence both explorers print: bytes per GPU, by kind, and whether it fits."""
    held = memory.model_state_bytes(num_params, stage=stage, world_size=world_size)
    fits = "fits" if held.total <= device_gb * memory.GB else "does not fit"
    return (
        f"{held.total / memory.GB:.2f} GB per GPU = params {held.params / memory.GB:.2f} + grads "
        f"{held.grads / memory.GB:.2f} + optimizer {held.optimizer / memory.GB:.2f} GB: {fits} "
        f"in {device_gb:g} GB (model states only)"
    )


def params_label(num_params: float) -> str:
    """A parameter count as a reader says it: 350M, 7.50B, 1.00T."""
    for scale, unit in ((1e12, "T"), (1e9, "B")):
        if num_params >= scale:
            return f"{num_params / scale:.2f}{unit}"
    return f"{num_params / 1e6:.0f}M"


def psi_choices(num_params: float, per_decade: int = 40) -> list[tuple[str, float]]:
    """(label, Ψ) from 10^8 to 10^12, evenly spaced in log, with `num_params` itself among them."""
    grid = {
        round(10 ** (8 + k / per_decade), -6) for k in range(4 * per_decade + 1)
    } | {float(num_params)}
    return [(params_label(psi), psi) for psi in sorted(grid)]


def stage_explorer_live(
    num_params: float = 7.5e9, world_size: int = 64, stage: int = 0
):
    """The same explorer as ipywidgets: needs a running kernel (it calls zerobook.accounting.memory). The
    sliders read as numbers (Ψ "7.50B", N "64"), and start exactly at the values given."""
    import ipywidgets as w

    sizes = sorted({2**k for k in range(11)} | {world_size})
    controls = {
        "stage": w.IntSlider(value=stage, min=0, max=3, description="stage"),
        "n": w.SelectionSlider(
            options=[(f"{n:,}", n) for n in sizes], value=world_size, description="N"
        ),
        "psi": w.SelectionSlider(
            options=psi_choices(num_params), value=float(num_params), description="Ψ"
        ),
        "device_gb": w.Dropdown(options=list(DEVICES_GB), description="GB per GPU"),
    }
    label = w.Label()

    def update(_=None):
        label.value = summary(
            controls["psi"].value,
            controls["stage"].value,
            controls["n"].value,
            controls["device_gb"].value,
        )

    for control in controls.values():
        control.observe(update, names="value")
    update()
    return w.VBox([*controls.values(), label])


def html_table(headers, rows, caption: str = "") -> HTML:
    """A plain HTML table of already-formatted cells (the book styles it like its own tables)."""
    from html import escape

    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
        for row in rows
    )
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return HTML(
        f'<table class="table">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )
