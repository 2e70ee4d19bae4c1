"""The chapter "When a run goes wrong" reads every rank's flight recorder: a rank that torchrun
stops (SIGTERM, once a peer has failed) must still leave its record, and still end by SIGTERM."""

import os
import pickle
import signal
import subprocess
import sys
import textwrap

STOPPED_RANK = textwrap.dedent(
    """
    import os, sys, time
    import torch, torch.distributed as dist
    from zerobook.runs import gone_wrong

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    dist.all_reduce(torch.ones(3))
    gone_wrong.keep_flight_record_when_stopped(sys.argv[1], 0)
    os.kill(os.getpid(), 15)  # as torchrun's agent stops a rank
    time.sleep(30)
    """
)


def test_a_rank_stopped_by_sigterm_writes_its_flight_record_and_ends_by_sigterm(
    tmp_path,
):
    env = {"TORCH_FR_BUFFER_SIZE": "8"}
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_RANK, str(tmp_path)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGTERM, done.stderr
    record = pickle.loads((tmp_path / "fr_rank0").read_bytes())
    assert [e["profiling_name"] for e in record["entries"]] == ["gloo:all_reduce"]
