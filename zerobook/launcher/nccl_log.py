"""Reading `NCCL_DEBUG=INFO`: what a communicator's start tells about the machine it runs on.

NCCL prints each line as `host:pid:tid [cudaDev] NCCL INFO <text>` (src/debug.cc; a timestamp
goes first on WARN lines); the texts read here are printed at a communicator's creation, in the
words of NCCL 2.30's source (github.com/NVIDIA/nccl):

    NCCL version 2.30.1+cuda12.9                                          src/init.cc, showVersion
    Using network IB                                                      src/init.cc
    comm 0x.. rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0  src/init.cc
    24 coll channels, 0 collnet channels, 16 nvls channels, 32 p2p ...    src/init.cc
    Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM                              src/transport/p2p.cc
    Channel 00 : 3[3] -> 4[4] via SHM/direct                               src/transport/shm.cc
    Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA                  src/transport/net.cc
    ncclCommInitRank comm 0x.. rank 3 nranks 16 ... - Init COMPLETE         src/init.cc

`read` turns a log (one process's or many, interleaved) into facts; `findings` says in words what
in them costs bandwidth or explains a hang; `example` prints, from those same format strings, the
log a healthy or a sick cluster would show (for a page with no GPU log recorded; say so there).
"""

import re
from collections import Counter

PREFIX = (  # src/debug.cc: a WARN line names the source file and line before "NCCL WARN"
    r"(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:(?P<where>\S+:\d+(?: \(\S+\))?) )?NCCL (?P<level>INFO|WARN) "
)
LINE = re.compile(PREFIX + r"(?P<text>.*)$")
COMM = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nRanks (?P<ranks>\d+) "
    r"nNodes (?P<nodes>\d+) localRanks (?P<local>\d+)"
)
CHANNEL = re.compile(
    r"Channel (?P<channel>\d+)(?:/\d+)? : (?P<src>\d+)\[\d+\] -> (?P<dst>\d+)\[\d+\]"
    r"(?: \[(?:send|receive)\])? via (?P<via>\S+)"
)
CHANNELS = re.compile(r"(?P<coll>\d+) coll channels, .*?(?P<nvls>\d+) nvls channels")
COMPLETE = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<ranks>\d+) .*Init COMPLETE"
)


def transport(via: str) -> str:
    """The kind of link a channel's `via` names: P2P (NVLink or PCIe, GPU to GPU), SHM (through
    the host's memory), NET/IB or NET/Socket (across nodes), with /GDRDMA kept (the NIC reads
    the GPU's memory directly)."""
    parts = via.split("/")
    if parts[0] != "NET":
        return parts[0]
    return "/".join(["NET", parts[1]] + (["GDRDMA"] if "GDRDMA" in parts else []))


def read(text: str) -> dict:
    """The facts of a log: NCCL's version, the network it chose, each rank's communicator
    (its host, ranks, nodes, ranks on its node), the links each channel uses counted by kind,
    the channels per communicator, which ranks finished starting, and every WARN line."""
    facts = {
        "version": None,
        "network": set(),
        "ranks": {},
        "links": Counter(),
        "coll_channels": set(),
        "nvls_channels": set(),
        "complete": set(),
        "warnings": [],
    }
    for raw in text.splitlines():
        version = re.search(r"NCCL version (\S+)", raw)
        if version:
            facts["version"] = version.group(1)
        line = LINE.search(raw)
        if not line:
            continue
        body = line["text"]
        if line["level"] == "WARN":
            facts["warnings"].append(f"{line['host']} ({line['where']}): {body}")
        elif body.startswith("Using network "):
            facts["network"].add(body.removeprefix("Using network ").strip())
        elif m := COMM.search(body):
            facts["ranks"][int(m["rank"])] = {
                "host": line["host"],
                "ranks": int(m["ranks"]),
                "nodes": int(m["nodes"]),
                "local": int(m["local"]),
            }
        elif m := COMPLETE.search(body):
            facts["complete"].add(int(m["rank"]))
        elif m := CHANNEL.search(body):
            facts["links"][transport(m["via"])] += 1
        elif m := CHANNELS.search(body):
            facts["coll_channels"].add(int(m["coll"]))
            facts["nvls_channels"].add(int(m["nvls"]))
    return facts


def findings(facts: dict) -> list[str]:
    """What the facts say is wrong, one sentence each (an empty list: nothing this reader knows
    of). Each is a reason measured bandwidth falls short of the NICs' or NVLink's, or a hang at
    the communicator's start."""
    said = []
    nodes = max((r["nodes"] for r in facts["ranks"].values()), default=1)
    if nodes > 1 and "Socket" in facts["network"]:
        said.append(
            "ranks on different nodes talk over TCP (Using network Socket, NET/Socket): NCCL "
            "found no InfiniBand or RoCE device or plugin, so busbw will be a fraction of the "
            "NICs'; look at NCCL_IB_DISABLE, NCCL_NET and whether the network plugin loaded."
        )
    if facts["links"]["NET/IB"]:
        said.append(
            f"{facts['links']['NET/IB']} network links without GPUDirect RDMA (no /GDRDMA): "
            "each message is staged through host memory; look at the nvidia-peermem module "
            "and the PCIe topology (NCCL_NET_GDR_LEVEL)."
        )
    if facts["links"]["SHM"]:
        said.append(
            f"{facts['links']['SHM']} links between GPUs of one node go through host memory "
            "(SHM), not peer to peer: NCCL_P2P_DISABLE is set, or the PCIe switches (ACS) or "
            "the IOMMU forbid P2P; NVLink is not used."
        )
    expected = {r["ranks"] for r in facts["ranks"].values()}
    started = set(facts["ranks"])
    if started - facts["complete"]:
        missing = ", ".join(map(str, sorted(started - facts["complete"])))
        said.append(
            f"rank(s) {missing} began creating the communicator and never printed Init "
            "COMPLETE: a hang at the start is in here (a rank that never arrived, or a "
            "network that cannot connect), not in training."
        )
    elif expected and len(started) < max(expected):
        said.append(
            f"the log holds {len(started)} of {max(expected)} ranks: read every node's "
            "log (NCCL_DEBUG_FILE=nccl.%h.%p writes one file a process)."
        )
    said += [f"NCCL warned: {w}" for w in facts["warnings"]]
    return said


FORMATS = {  # NCCL 2.30's format strings, verbatim (file in github.com/NVIDIA/nccl)
    "line": "%s:%d:%d [%d] NCCL INFO %s",  # src/debug.cc
    "network": "Using network %s",  # src/init.cc
    "comm": "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d",
    "channels": "%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, "
    "%d p2p channels per peer",  # src/init.cc
    "p2p": "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s",  # src/transport/p2p.cc
    "shm": "Channel %02d : %d[%d] -> %d[%d] via SHM/direct",  # src/transport/shm.cc
    "net": "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s",  # .../net.cc
    "complete": "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx"
    " - Init COMPLETE",  # src/init.cc
}


def printf(fmt: str, *args) -> str:
    """C's printf for FORMATS: %p prints the string given; `l` and `ll` are dropped."""
    return fmt.replace("%p", "%s").replace("%ll", "%").replace("%l", "%") % args


def example(
    nodes: int = 2,
    gpus: int = 4,
    network: str = "IB",
    gdr: bool = True,
    p2p: bool = True,
    channels: int = 2,
) -> str:
    """The INFO lines a ring of `nodes` x `gpus` ranks prints while its communicator starts,
    made from NCCL's format strings (not recorded on any machine): inside a node each rank sends
    to the next over NVLink (P2P/CUMEM) or, with `p2p` off, through host memory (SHM); the last
    GPU of a node sends to the next node's first over `network` ("IB" or "Socket")."""
    world, lines = nodes * gpus, []
    for rank in range(world):
        node, local = divmod(rank, gpus)
        say = lambda key, *a: lines.append(  # noqa: E731
            printf(
                FORMATS["line"],
                f"node{node}",
                4000 + local,
                4100 + local,
                local,
                printf(FORMATS[key], *a),
            )
        )
        comm = f"0x{0x5500000 + rank * 0x10000:x}"
        say("network", network)
        say("comm", comm, rank, world, nodes, gpus, local, 0)
        peer = (rank + 1) % world
        for c in range(channels):
            if peer // gpus != node:
                say(
                    "net",
                    c,
                    0,
                    rank,
                    local,
                    peer,
                    peer % gpus,
                    network,
                    local if network == "IB" else 0,  # a NIC a GPU; one socket device
                    "/GDRDMA" if gdr and network == "IB" else "",
                    "",
                    "",
                )
            elif p2p:
                say("p2p", c, 0, rank, local, peer, peer % gpus, "CUMEM", "", "")
            else:
                say("shm", c, rank, local, peer, peer % gpus)
        say("channels", channels, 0, 0, 2 * channels, 2)
        say(
            "complete",
            "ncclCommInitRank",
            comm,
            rank,
            world,
            local,
            local,
            0x18000 + 0x10000 * local,
            0x7A3E11D0C4F2B950,
        )
    version = printf(
        FORMATS["line"], "node0", 4000, 4100, 0, "NCCL version 2.30.1+cuda12.9"
    )
    return "\n".join([version] + lines) + "\n"
