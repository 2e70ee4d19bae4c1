"""Lab 6's checkpoint read back by a process the student's code never ran in.

    reading = start(path, shifted)           # rank 0, once the student's save has ended
    disk = result(reading, folder, me)       # every rank: what a fresh process found on disk
    python -m zerobook.labs.checkpoint_readback PATH SHIFTED OUT

The fresh process reads the DCP checkpoint at PATH with torch.distributed.checkpoint's own
FileSystemReader and no process group: every tensor it holds, whole (every rank's shards put
together), by its key. It reports the SHA-256 of each (`found`), and writes SHIFTED: the same
checkpoint, key for key, each floating-point tensor plus a random offset drawn there (`shifted`:
their digests). The harness then asks (zerobook.labs.fsdp2.checkpoint) whether every weight and
AdamW moment the model held at the save is among `found` (save wrote it to disk), and whether the
student's load of SHIFTED restores those values (load reads the disk: no process held them, so
nothing kept in memory, on the model or elsewhere, can give them back). 0-d tensors (AdamW's step)
and every other entry are copied as they are.
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

READ_TIMEOUT_S = (
    120.0  # a fresh interpreter imports torch: seconds, more on a busy machine
)
OUT = "readback.json"


def start(path: Path, shifted: Path) -> subprocess.Popen:
    """Start the fresh process (rank 0, after every rank's save has ended)."""
    package = Path(__file__).resolve().parents[2]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(package), os.environ.get("PYTHONPATH", "")]),
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            __name__,
            str(path),
            str(shifted),
            str(path.parent / OUT),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=str(path.parent),
    )


def result(reading: subprocess.Popen | None, folder: Path, me) -> dict:
    """What the fresh process found, on every rank ({"error": why} if it could not read): rank
    0 waits for it and writes why it failed; the others wait for its file (no collective waits
    the seconds it takes)."""
    out = folder / OUT
    if reading is not None:
        try:
            _, err = reading.communicate(timeout=READ_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            reading.kill()
            _, err = reading.communicate()
        if not out.exists():
            said = err.decode(errors="replace").strip().splitlines()
            why = said[-1] if said else f"it ended with code {reading.returncode}"
            _write(out, {"error": why[:300]})
    deadline = time.monotonic() + READ_TIMEOUT_S + 30
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not out.exists():
        return {
            "error": f"rank {me.rank} saw no read-back in {READ_TIMEOUT_S + 30:.0f} s"
        }
    return json.loads(out.read_text())


def _write(out: Path, value: dict) -> None:
    """Whole or not at all: the other ranks read the file as soon as it exists."""
    part = out.with_suffix(".part")
    part.write_text(json.dumps(value))
    part.replace(out)


def main(path: str, shifted: str, out: str) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    reader = dcp.FileSystemReader(path)
    entries = reader.read_metadata().state_dict_metadata
    state = {
        key: torch.empty(m.size, dtype=m.properties.dtype)
        if isinstance(m, TensorStorageMetadata)
        else None
        for key, m in entries.items()
    }
    dcp.load(state, storage_reader=reader, no_dist=True)
    tensors = {k: t for k, t in state.items() if torch.is_tensor(t)}
    found = {key: sha256([t]) for key, t in tensors.items()}
    offset = 1.0 + int.from_bytes(os.urandom(2), "big") / 65536  # in [1, 2), never told
    for key, t in tensors.items():
        if t.is_floating_point() and t.dim():
            state[key] = t + offset
    dcp.save(state, checkpoint_id=shifted, no_dist=True)
    moved = {key: sha256([state[key]]) for key in tensors}
    _write(Path(out), {"found": found, "shifted": moved})


if __name__ == "__main__":
    main(*sys.argv[1:4])
