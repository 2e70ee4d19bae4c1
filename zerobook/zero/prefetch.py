"""ZeRO-3's prefetch: which unit to start gathering while another computes, and how many may be
gathered at once (FSDP2's set_modules_to_forward_prefetch / _backward_prefetch; FSDP1's
forward_prefetch, BackwardPrefetch and limit_all_gathers).

    Zero3AdamW(model, (Block,), prefetch=Prefetch(forward=True, backward="pre", depth=1))

Units run forward in the order of model.named_modules() (a stack of blocks does), and backward
in reverse, the root first (its output, the logits, is where backward starts).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prefetch:
    """forward: gather the next unit(s) when a unit's forward starts. backward: "pre" gathers the
    next unit when the current one's backward starts (more overlap, one more unit in memory),
    "post" when its gradients are done, None never. depth: how many units ahead. max_gathered:
    skip a prefetch that would leave more non-root units gathered than this."""

    forward: bool = False
    backward: str | None = None
    depth: int = 1
    max_gathered: int | None = None

    def __post_init__(self):
        if self.backward not in (None, "pre", "post"):
            raise ValueError(
                f"backward prefetch must be None, 'pre' or 'post', not {self.backward!r}"
            )
        if self.depth < 1 or (self.max_gathered is not None and self.max_gathered < 1):
            raise ValueError(
                f"prefetch depth and max_gathered must be >= 1, not {self.depth} and {self.max_gathered}"
            )


def orders(units: list) -> tuple[list, list]:
    """(forward order, backward order) of the units: the root first in both."""
    blocks = [u for u in units if u.name != "root"]
    root = [u for u in units if u.name == "root"]
    return root + blocks, root + blocks[::-1]


def prefetch_after(unit, order: list, prefetch: Prefetch, log) -> None:
    """Start gathering the `prefetch.depth` units after `unit` in `order` (async), nearest first,
    unless the limit says no; `log(what, unit)` records "prefetch" and "prefetch skipped"."""
    index = order.index(unit)
    for later in order[index + 1 : index + 1 + prefetch.depth]:
        if later.gathered or later.pending is not None:
            continue
        gathered = sum(u.gathered for u in order if u.name != "root")
        if prefetch.max_gathered is not None and gathered >= prefetch.max_gathered:
            log("prefetch skipped", later)
            return
        log("prefetch", later)
        later.start_gather()
