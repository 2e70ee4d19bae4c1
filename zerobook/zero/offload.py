"""ZeRO-3 with its parameters offloaded to host memory: each unit's 16-bit weights live in pinned
CPU memory, and are copied to the GPU only while the unit computes.

The host-to-device copy takes the place of ZeRO-3's all-gather (ZeRO-Infinity's parameter
offload; FSDP's CPUOffloadPolicy): fetch -> compute -> free, per unit, in forward and again in
backward. With `prefetch`, the next unit's copy is issued on a side stream when a unit starts, so
the PCIe transfer runs while the current unit's kernels do. Gradients go the other way: each one
is copied into a pinned host buffer on a second side stream as soon as it is accumulated.

    units = offload_units(model, (Block,), prefetch=True)   # every Block's weights to the host
    model(x).sum().backward()                                # gradients land in units[i].host_grad

The root (embedding, final LayerNorm) stays on the device. One process, one device: offload
needs no peers. On a CPU the same code runs with plain copies (no streams, no pinning).
"""

from __future__ import annotations

import torch


class HostUnit:
    """One unit's weights: all of them in host memory always (`host`, 16-bit, numel), a device
    copy (`device_flat`, same shape) only between `fetch` and `free`; `log(what, unit)` records."""

    def __init__(self, name: str, module: torch.nn.Module, streams, log=None):
        self.name, self.module, self.log = (
            name,
            module,
            log or (lambda what, unit: None),
        )
        self.copy_stream, self.grad_stream = streams
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.device = self.params[0].device
        pinned = self.device.type == "cuda"
        numel = sum(p.numel() for p in self.params)
        dtype = self.params[0].dtype
        self.host = torch.empty(numel, dtype=dtype, pin_memory=pinned)
        self.host_grad = torch.zeros(numel, dtype=dtype, pin_memory=pinned)
        self.device_flat = torch.empty(numel, dtype=dtype, device=self.device)
        self.full_bytes = self.device_flat.untyped_storage().nbytes()
        self.offsets, offset = {}, 0
        for p in self.params:  # each weight to the host, and a view of the device copy
            n = p.numel()
            self.host[offset : offset + n].copy_(p.detach().reshape(-1))
            p.data = self.device_flat[offset : offset + n].view_as(p)
            p.register_post_accumulate_grad_hook(self.offload_grad)
            self.offsets[id(p)], offset = offset, offset + n
        self.ready = None  # the copy's event while a fetch is in flight
        self.addresses = []  # each fetch's device address (to find it in the allocator's record)
        self.free()

    @property
    def present(self) -> bool:
        return self.device_flat.untyped_storage().nbytes() > 0

    def free(self) -> None:
        """Drop the device copy: its storage (and every view's) back to zero bytes."""
        self.device_flat.untyped_storage().resize_(0)
        self.log("free", self)

    def fetch(self) -> None:
        """Allocate the device copy (on the computing stream, so the allocator reuses memory in that
        stream's order) and start the host-to-device copy on the copy stream, after everything
        the computing stream has queued so far."""
        if self.present:
            return
        self.device_flat.untyped_storage().resize_(self.full_bytes)
        self.addresses.append(self.device_flat.data_ptr())
        self.log("fetch", self)
        if self.copy_stream is None:
            self.device_flat.copy_(self.host)
            return
        self.copy_stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.copy_stream):
            self.device_flat.copy_(self.host, non_blocking=True)
            self.ready = self.copy_stream.record_event()

    def wait(self) -> None:
        """Make the computing stream wait for the copy (fetching now if nobody prefetched)."""
        self.fetch()
        if self.ready is not None:
            torch.cuda.current_stream(self.device).wait_event(self.ready)
            self.ready = None

    @torch.no_grad()
    def offload_grad(self, param: torch.Tensor) -> None:
        """A gradient is accumulated: copy it into `host_grad` (on the gradient stream) and drop it."""
        offset = self.offsets[id(param)]
        target = self.host_grad[offset : offset + param.numel()]
        if self.grad_stream is None:
            target.copy_(param.grad.reshape(-1))
        else:
            self.grad_stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.grad_stream):
                target.copy_(param.grad.reshape(-1), non_blocking=True)
            param.grad.record_stream(
                self.grad_stream
            )  # not reused before the copy is done
        param.grad = None


def _hooks(units: list, prefetch: bool) -> None:
    """Forward: wait for the unit, prefetch the next, free after. Backward: the same in reverse."""
    for index, unit in enumerate(units):
        after = units[index + 1] if index + 1 < len(units) else None
        before = units[index - 1] if index > 0 else None

        def pre_forward(module, args, unit=unit, after=after):
            unit.wait()
            if prefetch and after is not None:
                after.fetch()

        def pre_backward(module, grad_output, unit=unit, before=before):
            unit.wait()
            if prefetch and before is not None:
                before.fetch()

        module = unit.module
        module.register_forward_pre_hook(pre_forward)
        module.register_forward_hook(lambda m, a, out, unit=unit: unit.free())
        module.register_full_backward_pre_hook(pre_backward)
        module.register_full_backward_hook(lambda m, gi, go, unit=unit: unit.free())


def offload_units(
    model: torch.nn.Module, unit_types: tuple, prefetch: bool, log=None
) -> list:
    """Offload the parameters of every module of `unit_types` (one HostUnit each, in forward
    order); the model's other parameters stay on its device."""
    device = next(model.parameters()).device
    cuda = device.type == "cuda"
    streams = (
        (torch.cuda.Stream(device), torch.cuda.Stream(device)) if cuda else (None, None)
    )
    units = [
        HostUnit(name, module, streams, log)
        for name, module in model.named_modules()
        if name and isinstance(module, unit_types)
    ]
    _hooks(units, prefetch)
    return units
