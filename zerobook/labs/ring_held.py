"""Lab 3's sends and receives held until waited on, as a real network may hold them.

    with CommMeter() as meter, HeldP2P(student_file) as held:
        ring_all_reduce(tensor)          # the student's isend/irecv/batch_isend_irecv, unchanged
    held.drain()                         # what it never waited on: [(kind, "line 17: ...")]

A received chunk is promised only once its work's `wait()` returns. Here it lands in the
student's tensor at that `wait()` (or at the first `is_completed()` that sees it done), and
until then the tensor holds NaN: code that reads a chunk before waiting gets NaN every time,
not now and then. A send reads its tensor when it is called. `drain()` waits, for the
student, on what they never waited on, so the harness's next collective is not stuck behind
it, and says where each such call was made (the student's line).
"""

from __future__ import annotations

import linecache
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

NAMES = ("isend", "irecv", "batch_isend_irecv")


class Held:
    """A send's or a receive's work, as the student's code gets it."""

    def __init__(self, work, kind: str, where: str, tensor=None, buffer=None) -> None:
        self.work, self.kind, self.where = work, kind, where
        self.tensor, self.buffer, self.done = tensor, buffer, False

    def wait(self, timeout=None) -> bool:
        """Wait for the message; a receive's chunk lands in the student's tensor."""
        if not self.done and self.work is not None:
            self.work.wait() if timeout is None else self.work.wait(timeout)
        self.finish()
        return True

    def finish(self) -> None:
        if not self.done and self.tensor is not None:
            self.tensor.copy_(self.buffer)
        self.done = True

    def is_completed(self) -> bool:
        if not self.done and (self.work is None or self.work.is_completed()):
            self.finish()
        return self.done

    def __getattr__(self, name):  # torch's recv asks its work for _source_rank()
        return getattr(self.__dict__["work"], name)


class Batch:
    """One work of a coalesced batch (NCCL's batch_isend_irecv returns one for them all):
    when every such work is waited on, each receive of the batch lands."""

    def __init__(self, work, members: list[Held], batch: list) -> None:
        self.work, self.members, self.batch, self.done = work, members, batch, False

    def wait(self, timeout=None) -> bool:
        self.work.wait() if timeout is None else self.work.wait(timeout)
        self.done = True
        if all(part.done for part in self.batch):
            for held in self.members:
                held.finish()
        return True

    def is_completed(self) -> bool:
        return self.done or (self.work.is_completed() and self.wait())

    def __getattr__(self, name):
        return getattr(self.__dict__["work"], name)


class HeldP2P:
    """Context manager: dist's isend, irecv (and so send, recv) and batch_isend_irecv
    return Held works; `on_receive(i)` is called as the i-th receive (from 0) is made."""

    def __init__(self, student_file: str, on_receive=None) -> None:
        self.file = str(Path(student_file).resolve())
        self.on_receive = on_receive
        self.held: list = []  # Held, and a coalesced batch's own works
        self.received = 0
        self.batching: list | None = None
        self.saved: dict = {}

    def __enter__(self) -> HeldP2P:
        self.saved = {name: getattr(c10d, name) for name in NAMES}
        wrapped = {"isend": self.isend, "irecv": self.irecv}
        wrapped["batch_isend_irecv"] = self.batch_isend_irecv
        self.install(wrapped)
        return self

    def __exit__(self, *exc) -> None:
        self.install(self.saved)

    @staticmethod
    def install(functions: dict) -> None:
        for name, function in functions.items():
            setattr(c10d, name, function)
            setattr(dist, name, function)

    def where(self) -> str:
        """The student's innermost line on the stack: "line 17: dist.batch_isend_irecv(ops)"."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.file:
                line = linecache.getline(self.file, frame.f_lineno).strip()
                return f"line {frame.f_lineno} of your file: {line}"
            frame = frame.f_back
        return "a line of your file"

    def keep(self, held: Held) -> Held:
        self.held.append(held)
        if self.batching is not None:
            self.batching.append(held)
        return held

    def isend(self, tensor, dst=None, group=None, tag=0, group_dst=None):
        """dist.isend of a copy of `tensor` taken now."""
        copy = tensor.detach().clone()
        work = self.saved["isend"](copy, dst, group, tag, group_dst=group_dst)
        return self.keep(Held(work, "send", self.where(), buffer=copy))

    def irecv(self, tensor, src=None, group=None, tag=0, group_src=None):
        """dist.irecv into a buffer of ours; `tensor` holds NaN until the work is waited on."""
        if self.on_receive is not None:
            self.on_receive(self.received)
        self.received += 1
        buffer = torch.empty_like(tensor)
        work = self.saved["irecv"](buffer, src, group, tag, group_src=group_src)
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))
        return self.keep(Held(work, "receive", self.where(), tensor, buffer))

    def batch_isend_irecv(self, p2p_op_list):
        """dist.batch_isend_irecv: each op's isend or irecv is held as above."""
        self.batching = members = []
        try:
            works = self.saved["batch_isend_irecv"](p2p_op_list)
        finally:
            self.batching = None
        if all(isinstance(work, Held) for work in works):
            return works
        batch: list[Batch] = []
        batch += [Batch(work, members, batch) for work in works]
        for held in members:
            held.work = None  # the batch's own works carry it
            held.where = f"{held.where} (a batch)"
        self.held += batch
        return batch

    def drain(self) -> list[tuple[str, str]]:
        """Wait on what the student never waited on (their tensor is left as it was);
        return each such call's kind and line."""
        left = [held for held in self.held if not held.done]
        for held in left:
            if held.work is not None:
                held.work.wait()
            held.done = True
        self.held = []
        return [(held.kind, held.where) for held in left if isinstance(held, Held)]
