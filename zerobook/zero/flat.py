"""One flat buffer for all parameters, cut into buckets, each bucket split into N equal shards.

Every parameter becomes a view into `flat`. The parameters are grouped, in order, into buckets
of about `bucket_numel` elements (one bucket if None); each bucket is padded with zeros to a
multiple of N, and rank r owns the r-th N-th of every bucket. A reduce-scatter of one bucket's
gradients therefore hands each rank exactly the gradients of its part of that bucket: stage 1
does it for all buckets after backward, stage 2 for each bucket as soon as backward fills it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Bucket:
    """Parameters params[first:last] live in flat[start:start + numel] (numel padded to N)."""

    first: int
    last: int
    start: int
    numel: int

    def shard_numel(self, world_size: int) -> int:
        return self.numel // world_size


def plan_buckets(
    sizes: list[int], world_size: int, bucket_numel: int | None
) -> list[Bucket]:
    """Consecutive parameters into buckets of >= bucket_numel elements (the last may be smaller)."""
    buckets, first, start, filled = [], 0, 0, 0
    for index, size in enumerate(sizes):
        filled += size
        if (bucket_numel is not None and filled >= bucket_numel) or index == len(
            sizes
        ) - 1:
            padded = filled + (-filled) % world_size
            buckets.append(Bucket(first, index + 1, start, padded))
            first, start, filled = index + 1, start + padded, 0
    return buckets


class FlatParams:
    """The parameters of `params` moved into one padded, bucketed flat tensor."""

    def __init__(
        self,
        params,
        world_size: int,
        bucket_numel: int | None = None,
        flat_grads: bool = True,
    ):
        self.params = list(
            {id(p): p for p in params if p.requires_grad}.values()
        )  # tied: once
        dtypes = {p.dtype for p in self.params}
        if len(dtypes) != 1:
            raise ValueError(
                f"FlatParams needs one dtype, got {sorted(map(str, dtypes))}"
            )
        self.world_size = world_size
        self.numel = sum(p.numel() for p in self.params)
        self.buckets = plan_buckets(
            [p.numel() for p in self.params], world_size, bucket_numel
        )
        self.padded = sum(b.numel for b in self.buckets)
        self.shard_numel = self.padded // world_size
        device, dtype = self.params[0].device, self.params[0].dtype
        self.flat = torch.zeros(self.padded, dtype=dtype, device=device)
        self.flat_grad = (
            torch.zeros(self.padded, dtype=dtype, device=device) if flat_grads else None
        )
        self.offsets = self._adopt()

    def _adopt(self) -> list[int]:
        """Copy each parameter in and make it (and its gradient) a view of the flat buffers."""
        offsets = []
        for bucket in self.buckets:
            offset = bucket.start
            for p in self.params[bucket.first : bucket.last]:
                n = p.numel()
                self.flat[offset : offset + n].copy_(p.detach().reshape(-1))
                p.data = self.flat[offset : offset + n].view_as(p)
                if self.flat_grad is not None:
                    p.grad = self.flat_grad[offset : offset + n].view_as(p)
                offsets.append(offset)
                offset += n
        return offsets

    def bucket_view(self, tensor: torch.Tensor, bucket: Bucket) -> torch.Tensor:
        """A flat tensor's part that holds `bucket` (a view)."""
        return tensor[bucket.start : bucket.start + bucket.numel]

    def shard_of(self, tensor: torch.Tensor, bucket: Bucket, rank: int) -> torch.Tensor:
        """Rank `rank`'s N-th of `bucket` in a flat tensor (a view)."""
        n = bucket.shard_numel(self.world_size)
        return tensor[bucket.start + rank * n : bucket.start + (rank + 1) * n]

    def local_slices(self) -> list[tuple[int, int]]:
        """Where each bucket's shard sits in a rank's concatenated shard: (offset, numel)."""
        out, offset = [], 0
        for bucket in self.buckets:
            out.append((offset, bucket.shard_numel(self.world_size)))
            offset += bucket.shard_numel(self.world_size)
        return out

    def shard_segments(self, rank: int, labels: list) -> list[tuple[int, int, object]]:
        """Runs (start, stop, label) of rank `rank`'s shard, in shard coordinates, where each
        parameter carries labels[i] (its parameter group, say); a bucket's padding takes the label
        of the bucket's last parameter. Adjacent runs with one label are merged."""
        runs: list = []
        for bucket, (local, n) in zip(self.buckets, self.local_slices()):
            low = bucket.start + rank * n
            for index in range(bucket.first, bucket.last):
                start = self.offsets[index]
                stop = (
                    bucket.start + bucket.numel
                    if index == bucket.last - 1
                    else start + self.params[index].numel()
                )
                a, b = max(low, start) - low + local, min(low + n, stop) - low + local
                if a < b and runs and runs[-1][1] == a and runs[-1][2] == labels[index]:
                    runs[-1] = (runs[-1][0], b, labels[index])
                elif a < b:
                    runs.append((a, b, labels[index]))
        return runs

    def shard(self, tensor: torch.Tensor, rank: int) -> torch.Tensor:
        """Rank `rank`'s shard of a flat tensor: its N-th of every bucket, concatenated (a copy)."""
        return torch.cat([self.shard_of(tensor, b, rank) for b in self.buckets])

    def zero_grad(self) -> None:
        """Zero the gradients in place (they must stay views of flat_grad)."""
        self.flat_grad.zero_()
        for p, offset in zip(self.params, self.offsets):
            if (
                p.grad is None
                or p.grad.data_ptr() != self.flat_grad[offset:].data_ptr()
            ):
                p.grad = self.flat_grad[offset : offset + p.numel()].view_as(p)
