"""zerobook.launcher.nccl_log: NCCL_DEBUG=INFO lines read into facts and findings.

The lines are NCCL's own format strings (nccl_log.FORMATS, from NCCL 2.30's source) printed by
`example`; a log recorded on a GPU host by make gpu-check (the nccl_debug section of
benchmarks/results/gpu_*.json), where one is kept, is read too."""

import json
from pathlib import Path

import pytest

from zerobook.launcher import nccl_log

RESULTS = Path(__file__).parent.parent / "benchmarks" / "results"


def test_a_healthy_two_node_ring_has_nothing_to_say():
    facts = nccl_log.read(nccl_log.example(nodes=2, gpus=4))
    assert facts["version"] == "2.30.1+cuda12.9"
    assert facts["network"] == {"IB"}
    assert nccl_log.ranks(facts) == list(range(8))
    assert {c["nodes"] for c in facts["comms"].values()} == {2}
    assert {host for host, pid, comm in facts["comms"]} == {"node0", "node1"}
    # 2 channels a rank: 3 of a node's 4 ranks send inside it, the 4th to the next node
    assert facts["links"] == {"P2P": 12, "NET/IB/GDRDMA": 4}
    assert facts["complete"] == set(facts["comms"])
    assert nccl_log.findings(facts) == []


@pytest.mark.parametrize(
    "sick, words",
    [
        (dict(network="Socket"), "TCP"),
        (dict(gdr=False), "4 network links without GPUDirect RDMA"),
        (dict(p2p=False), "12 links between GPUs of one node go through host memory"),
    ],
)
def test_each_sickness_is_named_once(sick, words):
    said = nccl_log.findings(nccl_log.read(nccl_log.example(**sick)))
    assert len(said) == 1 and words in said[0], said


def test_a_rank_that_never_finished_starting_is_named():
    lines = nccl_log.example(nodes=2, gpus=2).splitlines()
    stuck = [
        line for line in lines if not ("rank 3 nranks" in line and "COMPLETE" in line)
    ]
    assert len(stuck) == len(lines) - 1
    said = nccl_log.findings(nccl_log.read("\n".join(stuck)))
    assert len(said) == 1 and said[0].startswith(
        "rank 3 of 4 (node1, pid 4001) began"
    ), said


def test_a_second_communicator_that_hangs_is_not_hidden_by_the_first():
    """A job makes several communicators (a mesh's dimensions, point-to-point pairs): rank 0 of
    one finishing says nothing of rank 0 of another."""
    first = nccl_log.example(nodes=1, gpus=2)
    second = [
        line.replace("0x55", "0x77")
        for line in first.splitlines()
        if "node0:4000:" in line and "COMPLETE" not in line
    ]
    said = nccl_log.findings(nccl_log.read(first + "\n".join(second)))
    assert len(said) == 1 and said[0].startswith("rank 0 of 2 (node0, pid 4000)"), said


def test_gpudirect_on_grace_and_a_plugins_network_are_read():
    """NCCL prints /GDRDMA(PCI) on Grace's C2C systems; a plugin names its own network."""
    for via, kind in (
        ("NET/IB/0/GDRDMA(PCI)", "NET/IB/GDRDMA"),
        ("NET/IBext_v8/0/GDRDMA", "NET/IBext_v8/GDRDMA"),
        ("NET/IBext_v8/0", "NET/IBext_v8"),
        ("P2P/CUMEM/read", "P2P"),
    ):
        assert nccl_log.transport(via) == kind
    text = nccl_log.example(gdr=False).replace("NET/IB/", "NET/IBext_v8/")
    said = nccl_log.findings(nccl_log.read(text))
    assert len(said) == 1 and said[0].startswith("4 network links without"), said


def test_one_node_of_two_is_not_the_whole_log():
    lines = nccl_log.example(nodes=2, gpus=2).splitlines()
    said = nccl_log.findings(
        nccl_log.read("\n".join(x for x in lines if "node1" not in x))
    )
    assert len(said) == 1 and "2 of 4 ranks" in said[0], said


def test_warnings_with_timestamps_and_foreign_prefixes():
    """A WARN line carries a timestamp (NCCL_DEBUG_TIMESTAMP_LEVELS' default); launchers such as
    Ray put their own prefix before each line: both are read."""
    text = (
        "(Worker pid=77) "
        + nccl_log.example(nodes=1, gpus=2).replace("\n", "\n(Worker pid=77) ")
        + "[2026-11-29 04:40:00] node0:4000:4100 [0] transport/net_ib.cc:95 NCCL WARN"
        " NET/IB : No device found.\n"
    )
    facts = nccl_log.read(text)
    assert facts["links"] == {"P2P": 4} and nccl_log.ranks(facts) == [0, 1]
    assert facts["complete"] == set(facts["comms"])
    assert nccl_log.findings(facts) == [
        "NCCL warned: node0 (transport/net_ib.cc:95): NET/IB : No device found."
    ]


def test_printf_prints_nccls_conversions():
    assert nccl_log.printf("%p %02d/%01d %lx 0x%llx", "0xab", 3, 0, 255, 4096) == (
        "0xab 03/0 ff 0x1000"
    )


def recorded() -> list:
    """The NCCL logs make gpu-check kept: the nccl_debug section of results/gpu_*.json."""
    out = []
    for path in sorted(RESULTS.glob("gpu_*.json")):
        section = json.loads(path.read_text()).get("nccl_debug")
        if isinstance(section, dict) and "text" in section:
            out.append(pytest.param(section, id=path.name))
    return out


@pytest.mark.parametrize("section", recorded())
def test_a_recorded_log_is_read_whole(section):
    """Every rank of a log make gpu-check recorded finished starting, and said so; what the
    report kept is what the reader reads now."""
    facts = nccl_log.read(section["text"])
    assert facts["version"] and facts["comms"]
    assert facts["complete"] == set(facts["comms"])
    assert nccl_log.ranks(facts) == section["ranks"]
