"""Freed storage caught before torch reads it: a named error, never a SIGSEGV.

ZeRO-3 frees a unit's full weights by resizing their storage to 0 bytes
(`param.untyped_storage().resize_(0)`): the tensor keeps its shape, and a kernel that reads
or writes it touches memory that is no longer the tensor's. On CPU that is a SIGSEGV (or
silently wrong numbers), in whatever code touched it first. So the harnesses check:

    freed(param)                      # True: its storage no longer holds its elements
    readable(param, "blocks.2.mlp.up.weight")  # raises FreedStorage naming it, if freed
    rebound(model, storages)          # raises if a parameter's .data was rebound
    guard_units(units, names)         # checks at each unit's forward and backward only
    with FreedCalls() as calls:       # the torch functions Python calls, checked while
        calls.on = True               # on (the capstone's: 1.1x, FreedGuard's 2.4x)
    with FreedGuard(names) as guard:  # every operation torch runs, checked first
        guard.at = "step 0, backward"  # the phase its errors name

`FreedGuard` is a torch dispatch mode: it sees each of torch's own operations (ATen's) before
it runs, in forward, in backward (a weight freed after forward and not gathered again is
read there) and in the collectives (c10d's), with their tensors. Operations that read no
element (a resize, a detach, an empty tensor shaped like another) pass; any other with a
freed tensor raises (a view too: torch refuses to make one, in words of its own). `names` maps a parameter (by id, or its storage) to its name, so the
error says which weights were used, and when.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class FreedStorage(RuntimeError):
    """A tensor whose storage was freed was about to be read or written."""


def freed(tensor) -> bool:
    """Whether `tensor`'s storage is too small for the elements its view spans (resized
    to 0 bytes by a ZeRO-3 free, say)."""
    if not isinstance(tensor, torch.Tensor) or tensor.numel() == 0:
        return False
    if tensor.is_sparse or tensor.is_nested or tensor.device.type == "meta":
        return False
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # no storage (a functional tensor)
        return False
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(tensor.shape, tensor.stride()))
    return storage.nbytes() < (tensor.storage_offset() + span) * tensor.element_size()


def storage_key(tensor: torch.Tensor) -> int:
    """The storage's identity (the same after a resize; another for a new tensor)."""
    return tensor.untyped_storage()._cdata


def readable(tensor, name: str, doing: str = "read") -> None:
    """Raise FreedStorage if `tensor`'s storage was freed (the harness's own reads)."""
    if freed(tensor):
        raise FreedStorage(
            f"{name}'s storage was freed (resized to 0 bytes) when it was {doing}: "
            "gather the full weights before they are used, free them only after"
        )


def rebound(model, storages: dict) -> None:
    """Raise if the student's code rebound a parameter's .data (a tensor of its own, not
    the parameter's storage resized): the harness measures the parameters' storage."""
    for name, param in model.named_parameters():
        if storage_key(param) != storages[name]:
            raise RuntimeError(
                f"{name}'s .data was rebound to another tensor (shape now "
                f"{list(param.shape)}): free a parameter by resizing its own storage "
                "(param.untyped_storage().resize_(0)) and gather into it, never by "
                "rebinding param.data; the grader measures the parameters' storage"
            )


class Names:
    """Which parameter a tensor is: by its id, or by its storage (`param.data` is
    another tensor object over the same storage)."""

    def __init__(self):
        self.by_id, self.by_storage = {}, {}

    def learn(self, names: dict) -> None:
        """{parameter: name}."""
        for tensor, name in names.items():
            self.by_id[id(tensor)] = name
            self.by_storage[storage_key(tensor)] = name

    def of(self, tensor) -> str:
        found = self.by_id.get(id(tensor)) or self.by_storage.get(storage_key(tensor))
        return found or f"a tensor of shape {list(tensor.shape)}"


def guard_units(units: dict, names: dict) -> None:
    """Hooks of the harness's, registered after the student's (so they run after them):
    before each unit computes, and before its backward begins, its parameters must not
    be freed (FreedStorage names the first). `units`: {unit name: (module, its own
    parameters)}; `names`: id of a parameter -> its name. Cheaper than FreedGuard (a
    check per unit, not per operation), and blind inside a unit."""

    def check(unit: str, params: list, doing: str) -> None:
        for param in params:
            readable(param, names[id(param)], f"{doing} ({unit}'s)")

    for unit, (module, params) in units.items():

        def before(module, args, unit=unit, params=params):
            check(unit, params, "about to compute in forward")

        def after(module, args, output, unit=unit, params=params):
            if isinstance(output, torch.Tensor) and output.requires_grad:
                output.register_hook(
                    lambda grad: check(unit, params, "about to be used by backward")
                )

        module.register_forward_pre_hook(before)
        module.register_forward_hook(after)


# operations that read or write no element of their tensors: they may see a freed one
METADATA = {
    "resize_", "set_", "detach", "alias", "lift_fresh", "empty_like", "new_empty",
    "new_empty_strided", "zeros_like", "ones_like", "is_same_size", "_to_copy_meta",
}  # fmt: skip


class FreedGuard(TorchDispatchMode):
    """Check the tensors of every operation torch runs (forward, backward, collectives)
    for freed storage, unless it reads no element (METADATA); raise FreedStorage naming the
    parameter, and `at`, the phase the harness says it is in ("step 2, forward")."""

    def __init__(self, names: dict | None = None, at: str = ""):
        super().__init__()
        self.names, self.at = Names(), at
        self.name(names or {})

    def name(self, names: dict) -> None:
        """Learn `names`: {parameter: name}."""
        self.names.learn(names)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket.__name__ not in METADATA:
            for tensor in tree_flatten((args, kwargs))[0]:
                if isinstance(tensor, torch.Tensor) and freed(tensor):
                    self.refuse(tensor, func.overloadpacket.__name__)
        return func(*args, **kwargs)

    def refuse(self, tensor, what: str) -> None:
        when = f" in {self.at}" if self.at else ""
        raise FreedStorage(
            f"{self.names.of(tensor)} was used (by torch's {what}){when} after its storage "
            "was freed (resized to 0 bytes): gather a unit's full weights before it "
            "computes, and free them only after"
        )


# torch functions that read no element: a freed tensor may pass through them
PASSING = {
    "__get__", "__set__", "untyped_storage", "size", "dim", "numel", "element_size",
    "stride", "storage_offset", "data_ptr", "is_contiguous", "requires_grad_", "detach",
    "register_hook", "register_post_accumulate_grad_hook", "__len__", "__hash__",
}  # fmt: skip


class FreedCalls(TorchFunctionMode):
    """FreedGuard's lighter kin, for a long run: a torch function mode, so it sees what
    Python calls (the student's gather and copy, a forward's F.linear), not backward's
    own operations (guard_units checks each unit's before its backward). Checks only
    while `on`; on the mode stack for the whole run (the grader measures the modes)."""

    def __init__(self, names: dict | None = None):
        super().__init__()
        self.on, self.names = False, Names()
        self.names.learn(names or {})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if self.on and name not in PASSING:
            for tensor in tree_flatten((args, kwargs))[0]:
                if isinstance(tensor, torch.Tensor) and freed(tensor):
                    raise FreedStorage(
                        f"{self.names.of(tensor)} was used (by {name}) after its storage was freed "
                        "(resized to 0 bytes): gather a unit's full weights before "
                        "it computes (and before you copy into them), free them only "
                        "after"
                    )
        return func(*args, **kwargs)
