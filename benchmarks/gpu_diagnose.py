"""benchmarks/gpu.py's sections for the gone_wrong chapter: NCCL's own log of one all-reduce
(NCCL_DEBUG=INFO) and NCCL's flight recorder of a healthy run."""

import sys
from pathlib import Path

from gpu_paths import launch


def nccl_debug(gpus: int, tmp: str) -> dict:
    """NCCL_DEBUG=INFO of one all-reduce (zerobook.runs.hello) on every GPU of this host, a file
    per process (NCCL_DEBUG_FILE), kept whole; and what zerobook.launcher.nccl_log reads in it
    (the gone_wrong chapter shows both, labelled with this host)."""
    from zerobook.launcher import nccl_log

    folder = Path(tmp) / "nccl-debug"
    folder.mkdir()
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV",
        "NCCL_DEBUG_FILE": str(folder / "nccl.%h.%p.log"),
    }
    launch("hello", (gpus, "nccl", env), [], 300)
    text = "".join(path.read_text() for path in sorted(folder.glob("nccl.*.log")))
    facts = nccl_log.read(text)
    return {
        "text": text,
        "ranks": nccl_log.ranks(facts),
        "complete": sorted(facts["comms"][key]["rank"] for key in facts["complete"]),
        "network": sorted(facts["network"]),
        "links": dict(facts["links"]),
        "findings": nccl_log.findings(facts),
    }


def flight_recorder(gpus: int, tmp: str) -> dict:
    """NCCL's flight recorder of a healthy run (zerobook.runs.gone_wrong, every GPU, its dump at
    the end, TORCH_NCCL_ENABLE_TIMING on): each entry's fields as NCCL records them, the last
    entries, and what torch's analyzer (flight_recorder.fr_trace) prints for the dumps. The
    gone_wrong chapter's recorder ran on gloo; this is NCCL's."""
    import pickle
    import subprocess

    folder = Path(tmp) / "flight-recorder"
    folder.mkdir()
    env = {"TORCH_FR_BUFFER_SIZE": "64", "TORCH_NCCL_ENABLE_TIMING": "1"}
    launch("gone_wrong", (gpus, "nccl", env), ["--dump", str(folder)], 300)
    dumps = {p.name: pickle.loads(p.read_bytes()) for p in sorted(folder.iterdir())}
    first = next(iter(dumps.values()))
    shown = ("profiling_name", "collective_seq_id", "state", "duration_ms")
    shown += ("input_sizes", "input_dtypes", "timeout_ms")
    analyzer = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace"]
    done = subprocess.run([*analyzer, str(folder)], capture_output=True, text=True)
    return {
        "version": first.get("version"),
        "keys": sorted(first),
        "entry_keys": sorted(first["entries"][0]) if first["entries"] else [],
        "entries": len(first["entries"]),
        "last": [{k: e.get(k) for k in shown} for e in first["entries"][-3:]],
        "pg_config": {str(k): v for k, v in first.get("pg_config", {}).items()},
        "analyzer": (done.stdout + done.stderr)[-3000:],
    }
