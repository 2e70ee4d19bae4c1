"""The multi-node launch: the command every node runs, the SLURM script, and the command run
here with one node (the same c10d rendezvous a cluster uses)."""
import json
import os
import socket
import subprocess

import pytest

from zerobook import cluster


def test_the_command_names_the_nodes_the_processes_and_the_rendezvous():
    command = cluster.multinode_command("zerobook.labs.hello", nnodes=2, nproc_per_node=8,
                                        endpoint="node0:29500", run_id="job", args=["--x", 1])
    assert command[1:3] == ["-m", "torch.distributed.run"]
    for flag in ("--nnodes=2", "--nproc-per-node=8", "--rdzv-backend=c10d", "--rdzv-endpoint=node0:29500",
                 "--rdzv-id=job"):
        assert flag in command
    assert command[-4:] == ["zerobook.rank_entry", "zerobook.labs.hello", "--x", "1"]


@pytest.mark.parametrize("kwargs", [{"nnodes": 0, "nproc_per_node": 8, "endpoint": "h:1"},
                                    {"nnodes": 2, "nproc_per_node": 8, "endpoint": "nohostport"}])
def test_bad_input_is_refused_clearly(kwargs):
    with pytest.raises(ValueError, match="nnodes|endpoint"):
        cluster.multinode_command("zerobook.labs.hello", **kwargs)


def test_the_slurm_script_runs_one_task_per_node_with_the_first_node_as_endpoint():
    script = cluster.slurm_script("zerobook.labs.hello", nodes=4, gpus_per_node=8, port=29400)
    assert script.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                 "export OMP_NUM_THREADS=1"):
        assert line in script.splitlines()
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert "--rdzv-endpoint=$HEAD:29400" in srun and "--nnodes=4" in srun and "--rdzv-id=$SLURM_JOB_ID" in srun


def test_the_multinode_command_runs_here_with_one_node():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = cluster.multinode_command("zerobook.labs.hello", nnodes=1, nproc_per_node=2,
                                        endpoint=f"127.0.0.1:{port}", run_id="test")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "ZEROBOOK_REPORT"))}
    done = subprocess.run(command, env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    reports = [json.loads(line.split("[report] ", 1)[1]) for line in done.stdout.splitlines() if "[report] " in line]
    assert sorted((r["rank"], r["world_size"], r["total"]) for r in reports) == [(0, 2, 3.0), (1, 2, 3.0)]
