"""Launching beyond one machine: the torchrun command for each node of a multi-node job, and a
SLURM batch script that runs it.

    multinode_command("zerobook.runs.hello", nnodes=2, nproc_per_node=8, endpoint="node0:29500")
    print(slurm_script("zerobook.runs.hello", nodes=2, gpus_per_node=8))

The rank scripts do not change: `zb.setup()` reads what torchrun sets (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR) and picks NCCL when every local rank has a GPU. Every node runs the same
command; the c10d rendezvous at `endpoint` (a host and port every node can reach, usually the
first node's) numbers the nodes in the sorted order of their host names, and torchrun
numbers each node's ranks from there: RANK = group rank * nproc_per_node + LOCAL_RANK.
`nodes_on_this_machine` runs such a job with every "node" on this machine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zerobook.launcher.dist import REPORT_DIR_ENV


def multinode_command(
    target: str,
    *,
    nnodes: int,
    nproc_per_node: int,
    endpoint: str,
    run_id: str = "zerobook",
    args=(),
    python: str = sys.executable,
    rdzv: str = "c10d",
    node_flags=(),
) -> list[str]:
    """torchrun (as a module of `python`) for one node of an `nnodes`-node job, c10d
    rendezvous (`rdzv="static"`, torchrun's default, wants `--node-rank` in node_flags)."""
    if nnodes < 1 or nproc_per_node < 1:
        raise ValueError(
            f"nnodes and nproc_per_node must be >= 1, got {nnodes} and {nproc_per_node}"
        )
    if ":" not in endpoint:
        raise ValueError(f"endpoint must be host:port, got {endpoint!r}")
    return [
        python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc_per_node}",
        f"--rdzv-backend={rdzv}",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={run_id}",
        *node_flags,
        "-m",
        "zerobook.launcher.rank_entry",
        target,
        *[str(a) for a in args],
    ]


def free_port() -> int:
    """A TCP port on this machine that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nodes_on_this_machine(
    target: str,
    node_flags: list[list[str]],
    *,
    nproc_per_node: int,
    rdzv: str = "c10d",
    stagger_s: float = 1.0,
    timeout: float = 180,
) -> list[dict]:
    """One torchrun agent per entry of `node_flags` (`--local-addr`, `--node-rank`),
    started in that order `stagger_s` apart, as the nodes of one job on this machine;
    every rank's report with `node`, its agent's index in `node_flags`, in RANK order."""
    endpoint = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="nodes-") as scratch:
        return _run_nodes(
            Path(scratch),
            target,
            node_flags,
            nproc_per_node,
            endpoint,
            rdzv,
            stagger_s,
            timeout,
        )


def _run_nodes(
    out: Path, target, node_flags, nproc_per_node, endpoint, rdzv, stagger_s, timeout
) -> list[dict]:
    """nodes_on_this_machine's agents, their reports written under `out`."""
    agents = []
    for node, flags in enumerate(node_flags):
        folder = str(out / str(node))
        # TMPDIR: torchrun's own logs (a torchelastic_* folder) go with the scratch folder
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            REPORT_DIR_ENV: folder,
            "TMPDIR": folder,
        }
        command = multinode_command(
            target,
            nnodes=len(node_flags),
            nproc_per_node=nproc_per_node,
            endpoint=endpoint,
            run_id="nodes",
            rdzv=rdzv,
            node_flags=flags,
        )
        Path(folder).mkdir()
        agents.append(
            subprocess.Popen(
                command,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
        time.sleep(stagger_s)  # the join order
    logs = [agent.communicate(timeout=timeout)[0] for agent in agents]
    for agent, log in zip(agents, logs):
        if agent.returncode:
            code = agent.returncode
            raise RuntimeError(f"a node's torchrun failed ({code}):\n{log[-8000:]}")
    reports = [
        {**json.loads(path.read_text()), "node": int(path.parent.name)}
        for path in out.glob("*/rank*.json")
    ]
    return sorted(reports, key=lambda report: report["rank"])


def slurm_script(
    target: str,
    *,
    nodes: int,
    gpus_per_node: int,
    port: int = 29500,
    job_name: str = "zerobook",
    args=(),
) -> str:
    """A batch script: one task per node, each running `multinode_command` with the first node of
    the allocation as the rendezvous endpoint and the SLURM job id as the run id."""
    command = multinode_command(
        target,
        nnodes=nodes,
        nproc_per_node=gpus_per_node,
        endpoint=f"$HEAD:{port}",
        run_id="$SLURM_JOB_ID",
        args=args,
        python="python",
    )
    return "\n".join(
        [
            "#!/bin/bash",
            f"#SBATCH --job-name={job_name}",
            f"#SBATCH --nodes={nodes}",
            "#SBATCH --ntasks-per-node=1",
            f"#SBATCH --gpus-per-node={gpus_per_node}",
            "export OMP_NUM_THREADS=1",
            'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "srun " + " ".join(command),
            "",
        ]
    )
