"""Lab 6's checkpoint read back by a process the student's code never ran in.

    reading = start(path, shifted)           # rank 0, once the student's save has ended
    finish(reading, folder)                  # rank 0: the reader has ended
    disk = result(folder, me)                # every rank: what a fresh process found on disk
    python -m zerobook.labs.checkpoint_readback PATH SHIFTED OUT

The fresh process reads the DCP checkpoint at PATH with torch.distributed.checkpoint's own
FileSystemReader and no process group: every tensor it holds, whole (every rank's shards put
together), by its key. It reports the SHA-256 of each (`found`), and writes SHIFTED: the same
checkpoint, key for key, each floating-point tensor replaced by random values in [1, 2) drawn
there (`shifted`: their digests). The harness then asks (zerobook.labs.fsdp2.checkpoint) whether
every weight and AdamW moment the model held at the save is among `found` (save wrote it to
disk), and whether the student's load of SHIFTED restores those values (load reads the disk: no
process held them, and they are no function of the saved ones, so nothing kept in memory, on the
model or elsewhere, can give them back, nor one tensor read tell the others; an offset added to
the saved values could be absorbed: our red team saved values of 2^26, to which 1.5 rounds
back). Only floating-point tensors of one dimension or more count (an integer view of a weight
is not its checkpoint); 0-d tensors (AdamW's step) and every other entry are copied as they are,
the other entries as the bytes the save wrote (never unpickled here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from zerobook.train.sharded_checkpoint import sha256
from zerobook.trust import graded_rank, spare

# a fresh interpreter imports torch: seconds, more on a busy machine
READ_TIMEOUT_S = 120.0
OUT = "readback.json"


def start(path: Path, shifted: Path):
    """Start the fresh process (rank 0, after every rank's save has ended): through the spare
    a graded rank kept (zerobook.trust.spare), else as a child of this process."""
    paths = (path, shifted, path.parent / OUT)
    if spare.available():
        spare.ask(*paths)
        return spare
    return subprocess.Popen(
        spare.reader_command(paths),
        env=spare.reader_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=str(path.parent),
    )


def finish(reading, folder: Path) -> None:
    """Rank 0: wait for the reader; where it wrote nothing, write why (other ranks:
    `reading` is None or False, nothing to wait for)."""
    if not reading:
        return
    out = folder / OUT
    if reading is spare:
        code = spare.answer(READ_TIMEOUT_S)
    else:
        try:
            code = reading.wait(timeout=READ_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            reading.kill()
            code = None
    if not out.exists():
        why = "took too long" if code is None else f"ended with code {code}"
        _write(out, {"error": f"the reader {why} and wrote nothing"})


def result(folder: Path, me) -> dict:
    """What the fresh process found, on every rank ({"error": why} where it could not read),
    once rank 0's finish has it: each rank waits for the file (no collective waits the
    seconds the reader takes)."""
    out, wait = folder / OUT, READ_TIMEOUT_S + 30
    deadline = time.monotonic() + wait
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not out.exists():
        return {"error": f"rank {me.rank} saw no read-back in {wait:.0f} s"}
    return json.loads(out.read_text())


def _write(out: Path, value: dict) -> None:
    """Whole or not at all: the other ranks read the file as soon as it exists."""
    part = out.with_suffix(".part")
    part.write_text(json.dumps(value))
    part.replace(out)


def main(path: str, shifted: str, out: str) -> None:
    """The fresh process. It unpickles DCP's metadata, which the student's save wrote, so in
    a graded run it is first confined as a graded rank is: no new process
    (zerobook.trust.graded_rank)."""
    if graded_rank.wanted() and graded_rank.confine():
        _write(Path(out), {"error": "the reader could not be confined"})
        return
    try:
        _write(Path(out), read(path, shifted))
    except Exception as exc:  # noqa: BLE001 - the harness reports why
        said = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        _write(
            Path(out),
            {"error": f"not a DCP checkpoint a fresh process can read ({said})"},
        )


def read(path: str, shifted: str) -> dict:
    """`found`: the digest of each floating-point tensor (of one dimension or more) by key;
    `shifted`: the copy's, each such tensor new random values (written to `shifted`).
    Other tensors are copied as they are and count for nothing; other entries are copied as
    the bytes the save wrote, never unpickled here."""
    import io

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import (
        DefaultLoadPlanner,
        DefaultSavePlanner,
    )
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    class RawBytes(
        DefaultLoadPlanner
    ):  # an entry's bytes as they are (torch.load'd: never)
        def load_bytes(self, read_item, value) -> None:
            self.original_state_dict[read_item.dest_index.fqn] = io.BytesIO(
                value.read()
            )

    class AsRead(
        DefaultSavePlanner
    ):  # ... and written back as they are (torch.save'd: never)
        def transform_object(self, write_item, value):
            if isinstance(value, io.BytesIO):
                return io.BytesIO(value.getvalue())
            return super().transform_object(write_item, value)

    reader = dcp.FileSystemReader(path)
    entries = reader.read_metadata().state_dict_metadata
    state = {
        key: torch.empty(m.size, dtype=m.properties.dtype)
        if isinstance(m, TensorStorageMetadata)
        else None
        for key, m in entries.items()
    }
    dcp.load(
        state,
        storage_reader=reader,
        planner=RawBytes(flatten_state_dict=False),
        no_dist=True,
    )
    moved = {
        k: t
        for k, t in state.items()
        if torch.is_tensor(t) and t.is_floating_point() and t.dim()
    }
    found = {key: sha256([t]) for key, t in moved.items()}
    seed = int.from_bytes(os.urandom(8), "big")  # never told
    draw = torch.Generator().manual_seed(seed)
    for (
        key,
        t,
    ) in moved.items():  # values of their own, nothing a rank holds can round to
        state[key] = torch.rand(t.shape, generator=draw).add_(1.0).to(t.dtype)
    dcp.save(state, checkpoint_id=shifted, planner=AsRead(), no_dist=True)
    return {"found": found, "shifted": {key: sha256([state[key]]) for key in moved}}


if __name__ == "__main__":
    main(*sys.argv[1:4])
