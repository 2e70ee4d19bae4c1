"""Objects between ranks as JSON text, never as pickles: torch's `all_gather_object` and
`broadcast_object_list` unpickle what the peers send, and a peer running a student's file can
send the bytes of any pickle (one that imports `sys` and calls what it likes), so the harnesses
and the student's file use these instead (zerobook.trust.restricted hands them out under the
same names).

    everyone = plain_objects.all_gather({"host": "a"})     # [rank 0's, rank 1's, ...]
    path = plain_objects.broadcast(text, src=0)            # rank 0's value on every rank

Collectives: two all-gathers (the sizes, then the padded bytes) or two broadcasts, of uint8
tensors on the group's device (CUDA under NCCL). Values are what JSON holds (tuples come back
as lists).
"""

from __future__ import annotations

import json

import torch
import torch.distributed as dist


def device_of(group=None) -> torch.device:
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def encoded(value, device) -> torch.Tensor:
    """`value` as JSON's UTF-8 bytes, a 1-D uint8 tensor on `device`."""
    data = bytearray(json.dumps(value).encode())  # never empty: at least "null"
    return torch.frombuffer(data, dtype=torch.uint8).to(device)


def decoded(tensor: torch.Tensor, size: int):
    return json.loads(bytes(tensor[:size].cpu().tolist()).decode())


def all_gather(value, group=None) -> list:
    """Every rank's `value`, in rank order (all-gather of sizes, then of padded bytes)."""
    device = device_of(group)
    mine = encoded(value, device)
    size = torch.tensor([mine.numel()], device=device)
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size(group))]
    dist.all_gather(sizes, size, group=group)
    longest = int(max(s.item() for s in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: mine.numel()] = mine
    everyone = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(everyone, padded, group=group)
    return [decoded(t, int(s.item())) for t, s in zip(everyone, sizes)]


def broadcast(value, src: int = 0, group=None):
    """Rank `src`'s `value` on every rank (broadcast of the size, then of the bytes)."""
    device = device_of(group)
    mine = encoded(value, device) if dist.get_rank() == src else None
    size = torch.tensor([mine.numel() if mine is not None else 0], device=device)
    dist.broadcast(size, src=src, group=group)
    data = (
        mine if mine is not None else torch.empty(int(size.item()), dtype=torch.uint8)
    )
    data = data.to(device)
    dist.broadcast(data, src=src, group=group)
    return decoded(data, int(size.item()))


def all_gather_object(object_list: list, obj, group=None) -> None:
    """torch.distributed.all_gather_object's signature, through JSON."""
    object_list[:] = all_gather(obj, group)


def broadcast_object_list(object_list: list, src: int = 0, group=None, device=None):
    """torch.distributed.broadcast_object_list's signature, through JSON."""
    object_list[:] = broadcast(list(object_list), src, group)


def tensors_only(load):
    """torch.load that unpickles tensors and plain containers only (weights_only=True)."""

    def load_tensors(*args, **kwargs):
        if kwargs.get("weights_only") is False:
            from zerobook.trust.policy import PolicyViolation

            raise PolicyViolation(
                "torch.load(weights_only=False) would run a pickle's code: load tensors"
            )
        kwargs["weights_only"] = True
        return load(*args, **kwargs)

    return load_tensors


# what a graded file gets in place of the name (zerobook.trust.restricted): the same call, safe
WRAPPED = {
    "torch.load": tensors_only,
    "torch.distributed.all_gather_object": lambda _: all_gather_object,
    "torch.distributed.broadcast_object_list": lambda _: broadcast_object_list,
}
