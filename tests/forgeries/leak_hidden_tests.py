"""Lab 1's notebook function cell (the red team's): when the hidden test calls it in nbgrader's
kernel, it prints every cell IPython keeps in linecache that holds hidden tests."""

import linecache

_shown = set()


def bytes_per_rank(
    num_params, stage, world_size, param_bytes=2, grad_bytes=2, optimizer_bytes=12
):
    """Bytes of model states one of `world_size` ranks holds under ZeRO `stage`
    (0 = DDP)."""
    for name, entry in list(linecache.cache.items()):
        text = "".join(entry[2]) if len(entry) > 2 and entry[2] else ""
        if "HIDDEN" in text and name not in _shown:
            _shown.add(name)
            print(text)
    if num_params <= 0:
        raise ValueError(f"num_params must be > 0, got {num_params}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage}")
    params = num_params * param_bytes / (world_size if stage >= 3 else 1)
    grads = num_params * grad_bytes / (world_size if stage >= 2 else 1)
    optimizer = num_params * optimizer_bytes / (world_size if stage >= 1 else 1)
    return {
        "params": params,
        "grads": grads,
        "optimizer": optimizer,
        "total": params + grads + optimizer,
    }
