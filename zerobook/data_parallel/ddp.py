"""Data parallelism from scratch: replicate, split the batch, average the gradients.

Two ways to average: `average_gradients` after backward, one all-reduce per parameter; and
`OverlappedAllReduce`, which fills buckets from post-accumulate-grad hooks during backward and
all-reduces each full bucket asynchronously, as torch.nn.parallel.DistributedDataParallel does.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


@torch.no_grad()
def broadcast_params(model: torch.nn.Module, src: int = 0) -> None:
    """Replicate: every rank takes rank `src`'s weights (one broadcast per tensor)."""
    for tensor in [*model.parameters(), *model.buffers()]:
        dist.broadcast(tensor, src=src)


@torch.no_grad()
def average_gradients(model: torch.nn.Module, flat: bool = False) -> None:
    """All-reduce (SUM) every gradient, then divide by N: each rank ends with the mean.

    flat=False: one all-reduce per parameter tensor. flat=True: every gradient copied into one
    buffer and one all-reduce of it (DDP with a single bucket): the same sum and division for each
    element, one collective instead of one per tensor (the parity runs' references use it)."""
    world_size = dist.get_world_size()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if flat:
        all_reduce_flat(grads)
    else:
        for grad in grads:
            dist.all_reduce(grad)
    for grad in grads:
        grad.div_(world_size)


def all_reduce_flat(grads: list[torch.Tensor]) -> None:
    """all_reduce (SUM) of the gradients as one buffer of sum(numel) elements, copied back."""
    if len({g.dtype for g in grads}) > 1:
        raise ValueError(
            f"all_reduce_flat needs one dtype, got {sorted({str(g.dtype) for g in grads})}: one buffer holds them all"
        )
    buffer = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(buffer)
    for grad, piece in zip(grads, buffer.split([g.numel() for g in grads])):
        grad.copy_(piece.view_as(grad))


class OverlappedAllReduce:
    """Average gradients while backward is still running: buckets of about `bucket_bytes`.

    Gradients arrive in reverse order of use; a post-accumulate-grad hook copies each into the
    open bucket, and a full bucket is all-reduced asynchronously while backward goes on.
    `finish()` waits for the last buckets and writes the means back into `param.grad`.
    With overlap=False the same buckets are all-reduced only in `finish()`, after backward.
    """

    def __init__(
        self, model: torch.nn.Module, bucket_bytes: int = 1 << 20, overlap: bool = True
    ):
        self.overlap = overlap
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buckets = self._plan(bucket_bytes)
        self.where = {id(p): b for b, bucket in enumerate(self.buckets) for p in bucket}
        self.pending: list = []
        self.ready: dict[int, int] = {}
        self.flat: dict[int, torch.Tensor] = {}
        self.handles = [
            p.register_post_accumulate_grad_hook(self._on_grad) for p in self.params
        ]

    def _plan(self, bucket_bytes: int) -> list[list[torch.nn.Parameter]]:
        """Group parameters, last-used first (backward's order), into buckets of ~bucket_bytes."""
        buckets, current, size = [], [], 0
        for param in reversed(self.params):
            current.append(param)
            size += param.numel() * param.element_size()
            if size >= bucket_bytes:
                buckets.append(current)
                current, size = [], 0
        return buckets + ([current] if current else [])

    def _on_grad(self, param: torch.Tensor) -> None:
        index = self.where[id(param)]
        self.ready[index] = self.ready.get(index, 0) + 1
        if self.ready[index] == len(self.buckets[index]) and self.overlap:
            self._launch(
                index
            )  # the bucket is full: send it off while backward goes on

    def _launch(self, index: int) -> None:
        """Copy bucket `index`'s gradients into one flat tensor and start its all-reduce."""
        flat = torch.cat([p.grad.reshape(-1) for p in self.buckets[index]])
        self.flat[index] = flat
        self.pending.append((index, dist.all_reduce(flat, async_op=True)))

    @torch.no_grad()
    def finish(self) -> None:
        """Wait for every bucket's all-reduce and store the mean gradients."""
        world_size = dist.get_world_size()
        if not self.overlap:
            for index in range(len(self.buckets)):
                self._launch(index)
        for index, work in self.pending:
            work.wait()
            offset = 0
            for param in self.buckets[index]:
                numel = param.numel()
                param.grad.copy_(
                    self.flat[index][offset : offset + numel].view_as(param.grad)
                )
                param.grad.div_(world_size)
                offset += numel
        self.pending, self.ready, self.flat = [], {}, {}

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
