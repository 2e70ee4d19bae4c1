"""Rank side: process-group and device set-up, and `report` back to the notebook.

Every script that `zb.torchrun` launches calls `setup()` once and `report(...)` for its results.
The same script runs as a single process (world size 1) without torchrun.

torch is imported inside the functions, so `import zerobook` stays light for the notebook side.
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import sys
from dataclasses import asdict, dataclass, is_dataclass
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType

REPORT_DIR_ENV = "ZEROBOOK_REPORT_DIR"
TIMEOUT_ENV = "ZEROBOOK_COLLECTIVE_TIMEOUT"
BACKEND_ENV = "ZEROBOOK_BACKEND"
DEVICE_ENV = "ZEROBOOK_DEVICE"  # "cuda": gloo ranks keep CUDA tensors (several ranks may share a GPU)
INIT_BARRIER_ENV = "TORCH_DIST_INIT_BARRIER"  # torch's; see _init_process_group
DEFAULT_COLLECTIVE_TIMEOUT_S = 30.0  # a stuck collective fails well within a minute


@dataclass(frozen=True)
class Rank:
    """Who this process is and where its tensors live."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: str  # "cpu" or "cuda:LOCAL_RANK"

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def env_int(name: str, default: int) -> int:
    """An integer from the environment torchrun sets (RANK, WORLD_SIZE, ...), or `default`."""
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


def this_rank() -> int:
    """This process's global rank, from torchrun's RANK (0 when run as a plain script)."""
    return env_int("RANK", 0)


def choose_backend(local_world_size: int) -> tuple[str, str]:
    """gloo on CPU, unless every local rank has its own GPU: then NCCL. Returns (backend, why)."""
    import torch

    forced = os.environ.get(BACKEND_ENV)
    if forced:
        return forced, f"{BACKEND_ENV}={forced}"
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus >= local_world_size:
        return (
            "nccl",
            f"{gpus} GPU(s) for {local_world_size} local rank(s): one GPU per rank",
        )
    return "gloo", f"{gpus} GPU(s) for {local_world_size} local rank(s): CPU tensors"


def choose_device(backend: str, local_rank: int) -> str:
    """NCCL: this rank's own GPU. gloo: CPU. With ZEROBOOK_DEVICE=cuda: GPUs shared round-robin
    (gloo on CUDA tensors lacks send/recv, and NCCL refuses two ranks on one GPU: see
    benchmarks/results/gpu_*.md)."""
    import torch

    shared = os.environ.get(DEVICE_ENV) == "cuda" and torch.cuda.is_available()
    if backend == "nccl" and not shared:
        return f"cuda:{local_rank}"
    if shared:
        return f"cuda:{local_rank % torch.cuda.device_count()}"
    return "cpu"


def collective_timeout() -> timedelta:
    """How long a collective may wait for its peers before it fails (never torch's 30 minutes)."""
    return timedelta(
        seconds=float(os.environ.get(TIMEOUT_ENV, DEFAULT_COLLECTIVE_TIMEOUT_S))
    )


def setup(verbose: bool = True) -> Rank:
    """Initialise the default process group and pick the device; safe to call twice."""
    import torch
    import torch.distributed as dist

    world_size = env_int("WORLD_SIZE", 1)
    local_rank = env_int("LOCAL_RANK", 0)
    backend, why = choose_backend(env_int("LOCAL_WORLD_SIZE", world_size))
    device = choose_device(backend, local_rank)
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    if not dist.is_initialized():
        _init_process_group(backend, world_size)
        atexit.register(teardown)
    me = Rank(dist.get_rank(), dist.get_world_size(), local_rank, backend, device)
    if verbose and me.is_main:
        print(
            f"[zerobook] backend={backend} device={device.split(':')[0]} "
            f"world_size={me.world_size} ({why}){device_note(backend, device)}",
            flush=True,
        )
    return me


def device_note(backend: str, device: str) -> str:
    """What ZEROBOOK_DEVICE=cuda does not give, said when a run starts with it."""
    if os.environ.get(DEVICE_ENV) != "cuda":
        return ""
    if not device.startswith("cuda"):
        return f"; {DEVICE_ENV}=cuda ignored: no GPU here"
    if backend == "gloo":
        return (
            f"; {DEVICE_ENV}=cuda: gloo's send/recv, FSDP2 and sharded checkpoints crash on "
            "CUDA tensors (benchmarks/results/gpu_h200_2026-11-26.md)"
        )
    return ""


def _init_process_group(backend: str, world_size: int) -> None:
    """torchrun's env:// rendezvous; without torchrun, an in-process store for world size 1.

    With TORCH_DIST_INIT_BARRIER=1 torch ends init_process_group with a barrier on the store
    (no collective): no rank returns before every rank has connected all its gloo pairs.
    Without it a rank whose pairs were all connected could return, finish (a script that runs
    no collective) and exit while a slower peer was still connecting its other pairs; gloo
    reads the end of the exited rank's connection as an error on the peer's side ("Gloo
    connectFullMesh failed ... Connection closed by peer", the peer that left recording no
    failure: seen in make test on a slow machine, and in 1 of 30 launches here with the
    ranks' CPU time stolen)."""
    import torch.distributed as dist

    os.environ.setdefault(INIT_BARRIER_ENV, "1")
    restart = env_int("TORCHELASTIC_RESTART_COUNT", 0)
    if (
        "RANK" in os.environ
        and restart
        and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    ):
        # torchrun restarted the job (--max-restarts): its store still holds the last attempt's
        # addresses under the same keys, so this attempt rendezvouses under a prefix of its own.
        store = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            env_int("MASTER_PORT", 0),
            is_master=False,
            timeout=collective_timeout(),
        )
        dist.init_process_group(
            backend,
            store=dist.PrefixStore(f"zerobook/attempt_{restart}", store),
            rank=this_rank(),
            world_size=world_size,
            timeout=collective_timeout(),
        )
    elif "RANK" in os.environ:
        dist.init_process_group(backend, timeout=collective_timeout())
    else:
        dist.init_process_group(
            backend,
            store=dist.HashStore(),
            rank=0,
            world_size=1,
            timeout=collective_timeout(),
        )


def teardown() -> None:
    """Destroy the default process group if it is still up (registered at exit by `setup`)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _jsonable(value):
    """Tensors and NumPy values become lists/numbers, typed records (dataclasses) dicts of their
    fields, read-only mappings (a harness's settings) dicts; anything else JSON cannot hold is
    an error."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, MappingProxyType):
        return dict(value)
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(
        f"zb.report: cannot send a {type(value).__name__} back as JSON; "
        "send numbers, strings, lists, dicts, tensors or dataclasses"
    )


_reported: list[str | None] = [
    None
]  # the text of this rank's report file, as report wrote it


def report(**values) -> None:
    """Send JSON-able values back to the notebook: they appear in `result.ranks[rank]`.

    Several calls merge (a later key wins). Run without `zb.torchrun`, the values are printed.
    """
    from zerobook.trust import report_guard

    report_guard.check(
        inspect.currentframe().f_back
    )  # in a lab: only the harness reports (zerobook.trust.report_guard)
    text = json.dumps(
        values, default=_jsonable
    )  # fails here, in the rank, on bad values
    folder = os.environ.get(REPORT_DIR_ENV)
    if not folder:
        print(f"[report] {text}", flush=True)
        return
    path = Path(folder) / f"rank{this_rank()}.json"
    merged = json.loads(_reported[0] or "{}")  # what this process wrote, not the file
    merged.update(json.loads(text))
    _reported[0] = json.dumps(merged)
    write_atomically(path, _reported[0])
    report_guard.written(path, _reported[0])


def take_token() -> str | None:
    """Read and delete this rank's finish token (zerobook.launcher.failures.issue_tokens left it): done
    before the target runs, so that the target's code does not find it among the run's files."""
    folder = os.environ.get(REPORT_DIR_ENV)
    if not folder:
        return None
    path = (
        Path(folder) / f".token{this_rank()}.{env_int('TORCHELASTIC_RESTART_COUNT', 0)}"
    )
    token = path.read_text() if path.exists() else None
    path.unlink(missing_ok=True)
    return token


def finish_mark(token: str, report_text: str) -> str:
    """The finish token's signature of a report: HMAC-SHA256 of its text under the token."""
    import hmac

    return hmac.new(token.encode(), report_text.encode(), "sha256").hexdigest()


def mark_finished(token: str | None) -> None:
    """Tell the launcher the target returned, after its last line ran: the finish token's
    signature of what this rank reported (finish_mark), so that the launcher can tell the
    report the rank wrote from one another process of the run wrote over it."""
    folder = os.environ.get(REPORT_DIR_ENV)
    if folder and token:
        mark = finish_mark(token, _reported[0] or "")
        write_atomically(Path(folder) / f"rank{this_rank()}.done", mark)


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
