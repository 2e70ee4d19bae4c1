"""Launching beyond one machine: the torchrun command for each node of a multi-node job, and a
SLURM batch script that runs it.

    multinode_command("zerobook.runs.hello", nnodes=2, nproc_per_node=8, endpoint="node0:29500")
    print(slurm_script("zerobook.runs.hello", nodes=2, gpus_per_node=8))

The rank scripts do not change: `zb.setup()` reads what torchrun sets (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR) and picks NCCL when every local rank has a GPU. Every node runs the same
command; the c10d rendezvous at `endpoint` (a host and port every node can reach, usually the
first node's) numbers the nodes and their ranks.
"""
from __future__ import annotations

import sys


def multinode_command(target: str, *, nnodes: int, nproc_per_node: int, endpoint: str,
                      run_id: str = "zerobook", args=(), python: str = sys.executable) -> list[str]:
    """torchrun (as a module of `python`) for one node of an `nnodes`-node job, c10d rendezvous."""
    if nnodes < 1 or nproc_per_node < 1:
        raise ValueError(f"nnodes and nproc_per_node must be >= 1, got {nnodes} and {nproc_per_node}")
    if ":" not in endpoint:
        raise ValueError(f"endpoint must be host:port, got {endpoint!r}")
    return [python, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc-per-node={nproc_per_node}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={run_id}",
            "-m", "zerobook.rank_entry", target, *[str(a) for a in args]]


def slurm_script(target: str, *, nodes: int, gpus_per_node: int, port: int = 29500,
                 job_name: str = "zerobook", args=()) -> str:
    """A batch script: one task per node, each running `multinode_command` with the first node of
    the allocation as the rendezvous endpoint and the SLURM job id as the run id."""
    command = multinode_command(target, nnodes=nodes, nproc_per_node=gpus_per_node,
                                endpoint=f"$HEAD:{port}", run_id="$SLURM_JOB_ID", args=args, python="python")
    return "\n".join([
        "#!/bin/bash",
        f"#SBATCH --job-name={job_name}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={gpus_per_node}",
        "export OMP_NUM_THREADS=1",
        'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "srun " + " ".join(command),
        ""])
