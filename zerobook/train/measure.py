"""Measured, not assumed: bytes of the real tensors a rank holds, activations saved for backward,
the bytes alive at the peak of a computation (LiveBytes: a CPU's torch.cuda.max_memory_allocated),
and how fast the CPU runs an AdamW step (what offload adds).

Storage-deduplicated throughout: tied weights, views and gradients that live inside a bucket are
counted once, at the size of the storage that holds them.
"""

from __future__ import annotations

import inspect
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def storage_key(tensor: torch.Tensor) -> tuple:
    """What identifies the memory behind a tensor (views of one storage share it)."""
    return (
        tensor.device.type,
        tensor.device.index,
        tensor.untyped_storage().data_ptr(),
    )


def plain(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` as torch's own Tensor over the same storage: what a subclass of a student's says
    of itself (its own untyped_storage, its __torch_function__) set aside."""
    if type(tensor) in (torch.Tensor, torch.nn.Parameter):
        return tensor
    with torch._C.DisableTorchFunctionSubclass():
        return torch._C.TensorBase.as_subclass(tensor, torch.Tensor)


def attributes(thing) -> list:
    """What an object holds by name: its __dict__'s values and its __slots__' (not its class's)."""
    values = list(getattr(thing, "__dict__", {}).values())
    for cls in type(thing).__mro__:
        for slot in vars(cls).get("__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                try:
                    values.append(object.__getattribute__(thing, slot))
                except AttributeError:  # an empty slot
                    pass
    return values


def unique_bytes(tensors, seen: set | None = None) -> int:
    """Bytes of the storages behind `tensors`, each counted once (and not if already in `seen`)."""
    seen = set() if seen is None else seen
    total = 0
    for tensor in tensors:
        key = storage_key(tensor)
        if key not in seen:
            seen.add(key)
            total += tensor.untyped_storage().nbytes()
    return total


def view_key(tensor: torch.Tensor) -> tuple:
    """What identifies the elements a tensor shows: its storage and where it sits in it (views
    of one flat buffer differ; two Parameters over the same elements share it)."""
    return (
        storage_key(tensor),
        tensor.storage_offset(),
        tuple(tensor.shape),
        tensor.stride(),
    )


def num_params(model: torch.nn.Module) -> int:
    """Elements of `model`'s parameters, tied ones once (what the formulas call Ψ); bytes are
    counted by storage (`unique_bytes`), elements by view."""
    return sum({view_key(p): p.numel() for p in model.parameters()}.values())


@dataclass(frozen=True)
class StateBytes:
    """Measured bytes of parameters, gradients and optimizer state on one rank."""

    params: int
    grads: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer

    def per_param(self, num_params: int) -> dict:
        return {
            k: v / num_params
            for k, v in (
                ("params", self.params),
                ("grads", self.grads),
                ("optimizer", self.optimizer),
                ("total", self.total),
            )
        }


def optimizer_tensors(optimizer):
    """Every tensor an optimizer keeps: its own `state_tensors()` if it has one, else its state."""
    if hasattr(optimizer, "state_tensors"):
        yield from optimizer.state_tensors()
        return
    for state in optimizer.state.values():
        yield from (v for v in state.values() if torch.is_tensor(v))


def state_keys(optimizer) -> set:
    """The keys an optimizer of its kind keeps per parameter (AdamW: step, exp_avg,
    exp_avg_sq), read off a throwaway one of torch's class, stepped once: a key another's code
    added to its state is not the optimizer's."""
    base = next(
        c for c in type(optimizer).__mro__ if c.__module__.startswith("torch.optim")
    )
    group = optimizer.param_groups[0]
    takes = inspect.signature(base.__init__).parameters  # AdamW's groups say more
    options = {k: v for k, v in group.items() if k in optimizer.defaults and k in takes}
    probe = torch.zeros(1, device=group["params"][0].device, requires_grad=True)
    throwaway = base([probe], **options)
    probe.grad = torch.ones_like(probe)
    throwaway.step()
    return set(throwaway.state[probe])


def own_optimizer_tensors(optimizer, keys: set | None = None):
    """The tensors an optimizer keeps under its own keys (`keys`, else state_keys), no other."""
    keys = state_keys(optimizer) if keys is None else keys
    for state in optimizer.state.values():
        yield from (v for k, v in state.items() if k in keys and torch.is_tensor(v))


def model_state_bytes(
    model: torch.nn.Module, optimizer=None, seen: set | None = None
) -> StateBytes:
    """Bytes of the live parameters, gradients and optimizer state (each storage counted once;
    `seen`, if given, collects the storages counted, for a later unique_bytes to leave out)."""
    seen = set() if seen is None else seen
    params = unique_bytes(model.parameters(), seen)
    grads = unique_bytes(
        (p.grad for p in model.parameters() if p.grad is not None), seen
    )
    state = (
        unique_bytes(optimizer_tensors(optimizer), seen) if optimizer is not None else 0
    )
    return StateBytes(params, grads, state)


def cuda_memory() -> dict | None:
    """The CUDA caching allocator's view: bytes allocated now and at peak (None without CUDA)."""
    if not torch.cuda.is_available():
        return None
    return {
        "allocated": torch.cuda.memory_allocated(),
        "max_allocated": torch.cuda.max_memory_allocated(),
    }


@dataclass
class SavedTensors:
    """What autograd saved for backward inside `saved_activations()`: one entry per storage."""

    entries: list = field(default_factory=list)  # (shape, dtype, bytes)

    @property
    def bytes(self) -> int:
        return sum(entry[2] for entry in self.entries)


@contextmanager
def saved_activations(exclude=()):
    """Record every tensor autograd saves for backward, minus `exclude` (parameters, buffers).

    Uses torch.autograd.graph.saved_tensors_hooks; each storage is counted once.
    """
    seen = {storage_key(t) for t in exclude}
    record = SavedTensors()

    def pack(tensor):
        key = storage_key(tensor)
        if key not in seen:
            seen.add(key)
            record.entries.append(
                (tuple(tensor.shape), tensor.dtype, tensor.untyped_storage().nbytes())
            )
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield record


def activation_bytes(model: torch.nn.Module, inputs: torch.Tensor) -> SavedTensors:
    """Bytes autograd keeps between `model(inputs)` and its backward (model state excluded)."""
    state = [*model.parameters(), *model.buffers()]
    with saved_activations(exclude=state) as record:
        model(inputs)
    return record


class LiveBytes(TorchDispatchMode):
    """While active, the bytes of the storages the ops inside allocate that are still alive
    (`live`) and the most at once (`peak`; `reset()` starts a new peak from what is alive):
    each output's storage counted once, freed when the last tensor on it is gone (torch keeps
    a tensor's Python object alive as long as the tensor is, so a finalizer sees its end).
    Tensors from outside and in-place results are not counted."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self._storages: dict = {}  # data_ptr -> [tensors alive on it, bytes]

    def reset(self) -> None:
        self.peak = self.live

    def _released(self, key) -> None:
        entry = self._storages[key]
        entry[0] -= 1
        if not entry[0]:
            self.live -= entry[1]
            del self._storages[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        given = {
            t.untyped_storage().data_ptr()
            for t in tree_leaves((args, kwargs))
            if isinstance(t, torch.Tensor)
        }
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key in self._storages:
                self._storages[key][0] += 1
            elif key in given or not storage.nbytes():
                continue  # in place, a view of a tensor from outside, or empty
            else:
                self._storages[key] = [1, storage.nbytes()]
                self.live += storage.nbytes()
                self.peak = max(self.peak, self.live)
            weakref.finalize(tensor, self._released, key)
        return out


def adamw_elements_per_second(
    elements: int, steps: int = 3, repeats: int = 5, **options
) -> float:
    """torch.optim.AdamW(**options) stepping one fp32 CPU tensor of `elements`: elements
    updated per second, the best of `repeats` timings of `steps` steps (other work on shared
    cores only ever slows a timing down)."""
    master = torch.nn.Parameter(torch.randn(elements))
    master.grad = torch.randn(elements)
    optimizer = torch.optim.AdamW([master], lr=1e-3, **options)
    optimizer.step()  # creates the state
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            optimizer.step()
        best = min(best, time.perf_counter() - start)
    return steps * elements / best
