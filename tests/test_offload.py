"""ZeRO-3 with parameters offloaded to host memory (zerobook.zero.offload), on a CPU: the same
gradients as the resident model, one or two units present at a time, the fetches in order."""

import torch

from zerobook.train.models import GPT, Block, GPTConfig, next_token_loss, random_batch
from zerobook.zero.offload import offload_units

CONFIG = GPTConfig(vocab=64, hidden=32, layers=3, heads=2, seq_len=16)


def gradients(prefetch: bool | None):
    """Flat gradients of one forward + backward; None: nothing offloaded. Also the events."""
    torch.manual_seed(0)
    model, events, units = GPT(CONFIG), [], []
    present = lambda: sum(u.present for u in units)
    log = lambda what, unit: events.append((what, unit.name, present()))
    if prefetch is not None:
        units += offload_units(model, (Block,), prefetch, log)
        events.clear()  # the frees of construction
    next_token_loss(model, random_batch(CONFIG, 2, seed=1)).backward()
    offloaded = {id(p): (u, u.offsets[id(p)]) for u in units for p in u.params}
    parts = []
    for p in model.parameters():
        if id(p) in offloaded:
            unit, offset = offloaded[id(p)]
            assert p.grad is None  # moved to the host buffer, then dropped
            parts.append(unit.host_grad[offset : offset + p.numel()])
        else:
            parts.append(p.grad.reshape(-1))
    return torch.cat(parts), events, units


def test_offloaded_gradients_equal_the_resident_models_bit_for_bit():
    resident, _, _ = gradients(None)
    for prefetch in (False, True):
        grads, _, units = gradients(prefetch)
        assert torch.equal(grads, resident), prefetch
        assert not any(
            u.present for u in units
        )  # every device copy freed after backward


def test_prefetch_fetches_the_next_unit_before_freeing_this_one():
    _, plain, _ = gradients(False)
    _, ahead, _ = gradients(True)
    blocks = [f"blocks.{k}" for k in range(CONFIG.layers)]
    order = blocks + blocks[::-1]  # forward, then backward in reverse
    assert [name for what, name, _ in plain if what == "fetch"] == order
    assert [name for what, name, _ in ahead if what == "fetch"] == order
    assert max(n for what, _, n in plain if what == "fetch") == 1  # one unit at a time
    assert (
        max(n for what, _, n in ahead if what == "fetch") == 2
    )  # the next one arriving
    first_free = next(i for i, e in enumerate(ahead) if e[0] == "free")
    assert ahead[:first_free] == [("fetch", "blocks.0", 1), ("fetch", "blocks.1", 2)]
