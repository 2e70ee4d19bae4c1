"""Real text that every Python ships: the standard library's own source files, as bytes.

    train, held_out = text.load()               # uint8 tensors: byte-level tokens, 256 symbols
    tokens = text.batch(train, step=3, global_batch=12, seq_len=64, rank=1, world_size=3)
    text.ngram_bits_per_byte(train, held_out, n=2)   # the bigram baseline, add-one smoothing

Which files (`stdlib_files`): every `.py` file under `sysconfig.get_paths()["stdlib"]`, except
the test suites, the IDLE editor, lib2to3 and turtledemo (programs about Python, not the
library), `encodings/` and `pydoc_data/` (large generated tables), installed third-party
packages, and the helpers for one platform (`_aix*`, `_osx*`, `_android*`, `_apple*`, `_win*`).
The split is by file: a file is held out when the first byte of the SHA-256 of its path (relative
to the library, with `/`) is below 26 (about 10%), so adding a file never moves another. Files are
read in the order of their paths and joined with one newline. Another Python version ships other
files: sizes and baselines differ between versions, their relations do not.
"""

from __future__ import annotations

import hashlib
import math
import sysconfig
from pathlib import Path

import torch

LEFT_OUT_DIRS = {
    "test",
    "tests",
    "idlelib",
    "lib2to3",
    "turtledemo",
    "encodings",
    "pydoc_data",
    "site-packages",
    "dist-packages",
    "__pycache__",
    "ensurepip",
    "msilib",
}
ONE_PLATFORM = ("_aix", "_osx", "_android", "_apple", "_win")
HELD_OUT_BELOW = 26  # of 256: the first byte of the path's SHA-256 (26/256 = 10.2%)


def stdlib_files(root: Path | None = None) -> list[str]:
    """The library's source files the course trains on, as paths relative to `root`, sorted."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    out = []
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        if LEFT_OUT_DIRS & set(relative.parts[:-1]) or path.name.startswith(
            ONE_PLATFORM
        ):
            continue
        out.append(relative.as_posix())
    return sorted(out)


def held_out(relative: str) -> bool:
    """Whether a file (its path relative to the library) belongs to the held-out split."""
    return hashlib.sha256(relative.encode()).digest()[0] < HELD_OUT_BELOW


def load(root: Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, held-out): each split's files, joined by a newline, as uint8 tensors of bytes."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    splits = {False: [], True: []}
    for relative in stdlib_files(root):
        splits[held_out(relative)].append((root / relative).read_bytes())
    return tuple(
        torch.frombuffer(bytearray(b"\n".join(splits[k])), dtype=torch.uint8)
        for k in (False, True)
    )


def batch(
    data: torch.Tensor,
    *,
    step: int,
    global_batch: int,
    seq_len: int,
    rank: int = 0,
    world_size: int = 1,
    seed: int = 0,
) -> torch.Tensor:
    """This rank's rows of the global batch of `step`: `global_batch` windows of seq_len + 1 bytes
    at offsets drawn from (seed, step) alone, rows rank*B/N .. (rank+1)*B/N; int64 token ids.
    The same step gives the same batch on any run, so resuming needs only the step."""
    if global_batch % world_size:
        raise ValueError(
            f"global batch {global_batch} is not a multiple of world size {world_size}"
        )
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(
        len(data) - seq_len - 1, (global_batch,), generator=generator
    )
    per_rank = global_batch // world_size
    rows = starts[rank * per_rank : (rank + 1) * per_rank]
    return torch.stack([data[s : s + seq_len + 1] for s in rows.tolist()]).long()


def ngram_bits_per_byte(train: torch.Tensor, test: torch.Tensor, n: int) -> float:
    """Bits per byte of `test` under an order-n byte model counted on `train`, add-one (Laplace)
    smoothed: P(b | context) = (count(context, b) + 1) / (count(context) + 256). n = 1: unigram."""

    def codes(data: torch.Tensor) -> torch.Tensor:
        data, code = data.long(), torch.zeros(len(data) - n + 1, dtype=torch.long)
        for k in range(n):
            code = code * 256 + data[k : len(data) - n + 1 + k]
        return code

    counts = torch.bincount(codes(train), minlength=256**n).double()
    context = counts.view(-1, 256).sum(dim=1)
    test_codes = codes(test)
    probability = (counts[test_codes] + 1) / (context[test_codes // 256] + 256)
    return -(probability.log().sum() / math.log(2) / len(test_codes)).item()
