"""The multi-node launch: the command every node runs and the SLURM script. The command run here
with one node (the same c10d rendezvous a cluster uses) is asserted by a cell of
chapters/scaling_out.ipynb, which nbval runs."""

import pytest

from zerobook.launcher import cluster


def test_the_command_names_the_nodes_the_processes_and_the_rendezvous():
    command = cluster.multinode_command(
        "zerobook.runs.hello",
        nnodes=2,
        nproc_per_node=8,
        endpoint="node0:29500",
        run_id="job",
        args=["--x", 1],
    )
    assert command[1:3] == ["-m", "torch.distributed.run"]
    for flag in (
        "--nnodes=2",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=node0:29500",
        "--rdzv-id=job",
    ):
        assert flag in command
    assert command[-4:] == [
        "zerobook.launcher.rank_entry",
        "zerobook.runs.hello",
        "--x",
        "1",
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"nnodes": 0, "nproc_per_node": 8, "endpoint": "h:1"},
        {"nnodes": 2, "nproc_per_node": 8, "endpoint": "nohostport"},
    ],
)
def test_bad_input_is_refused_clearly(kwargs):
    with pytest.raises(ValueError, match="nnodes|endpoint"):
        cluster.multinode_command("zerobook.runs.hello", **kwargs)


def test_the_slurm_script_runs_one_task_per_node_with_the_first_node_as_endpoint():
    script = cluster.slurm_script(
        "zerobook.runs.hello", nodes=4, gpus_per_node=8, port=29400
    )
    assert script.startswith("#!/bin/bash\n")
    for line in (
        "#SBATCH --nodes=4",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8",
        "export OMP_NUM_THREADS=1",
    ):
        assert line in script.splitlines()
    srun = next(line for line in script.splitlines() if line.startswith("srun "))
    assert (
        "--rdzv-endpoint=$HEAD:29400" in srun
        and "--nnodes=4" in srun
        and "--rdzv-id=$SLURM_JOB_ID" in srun
    )


def test_a_static_node_is_given_its_node_rank():
    command = cluster.multinode_command(
        "zerobook.runs.hello",
        nnodes=2,
        nproc_per_node=4,
        endpoint="h:1",
        rdzv="static",
        node_flags=["--node-rank=1"],
    )
    assert "--rdzv-backend=static" in command and "--node-rank=1" in command
    # a flag of torchrun's, not of the script's
    assert command.index("--node-rank=1") < command.index(
        "zerobook.launcher.rank_entry"
    )
