"""Reading `NCCL_DEBUG=INFO`: what NCCL's log tells about the machine a job runs on.

NCCL prints each line as `host:pid:tid [cudaDev] NCCL INFO <text>` (src/debug.cc; a timestamp
goes first on WARN lines). The texts read here, in the words of NCCL 2.30's source
(github.com/NVIDIA/nccl): while a communicator starts,

    NCCL version 2.30.1+cuda12.9                                          src/init.cc, showVersion
    Using network IB                                                      src/init.cc
    comm 0x.. rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0  src/init.cc
    24 coll channels, 0 collnet channels, 16 nvls channels, 32 p2p ...    src/init.cc
    ncclCommInitRank comm 0x.. rank 3 nranks 16 ... - Init COMPLETE         src/init.cc

and, since NCCL connects each algorithm's channels at its first collective (NCCL_RUNTIME_CONNECT,
on by default where CUDA's cuMem API is: src/init.cc; at the start with NCCL_RUNTIME_CONNECT=0),
a line a channel and peer, `rank[GPU]` at each end (the GPU's index on its node):

    Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM                              src/transport/p2p.cc
    Channel 00 : 3[3] -> 4[4] via SHM/direct                               src/transport/shm.cc
    Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/7/GDRDMA                  src/transport/net.cc

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
COMPLETE = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<ranks>\d+) .*Init COMPLETE"
)


def transport(via: str) -> str:
    """The kind of link a channel's `via` names: P2P (NVLink, or PCIe peer to peer), SHM
    (through the host's memory), NET/<the network's name> across nodes (IB for InfiniBand and
    RoCE alike, Socket, a plugin's own name), with /GDRDMA kept when the NIC reads the GPU's
    memory directly (printed /GDRDMA(PCI) on Grace's C2C systems)."""
    parts = via.split("/")
    if parts[0] != "NET":
        return parts[0]
    rdma = any(part.startswith("GDRDMA") for part in parts)
    return "/".join(["NET", parts[1]] + (["GDRDMA"] if rdma else []))


def read(text: str) -> dict:
    """The facts of a log: NCCL's version, the networks it chose, each communicator of each
    process (keyed by host, pid and the communicator's address: a job makes several) with its
    rank, ranks, nodes and ranks on its node; those that printed Init COMPLETE; the links the
    channels use, counted by kind; the channels per communicator; every WARN line."""
    facts = {
        "version": None,
        "network": set(),
        "comms": {},
        "complete": set(),
        "links": Counter(),
        "warnings": [],
    }
    for raw in text.splitlines():
        version = re.search(r"NCCL version (\S+)", raw)
        if version:
            facts["version"] = version.group(1)
        line = LINE.search(raw)
        if not line:
            continue
        body, process = line["text"], (line["host"], int(line["pid"]))
        if line["level"] == "WARN":
            facts["warnings"].append(f"{line['host']} ({line['where']}): {body}")
        elif body.startswith("Using network "):
            facts["network"].add(body.removeprefix("Using network ").strip())
        elif m := COMM.search(body):
            facts["comms"][(*process, m["comm"])] = {
                "rank": int(m["rank"]),
                "ranks": int(m["ranks"]),
                "nodes": int(m["nodes"]),
                "local": int(m["local"]),
            }
        elif m := COMPLETE.search(body):
            facts["complete"].add((*process, m["comm"]))
        elif m := CHANNEL.search(body):
            facts["links"][transport(m["via"])] += 1
    return facts


def ranks(facts: dict) -> list[int]:
    """The ranks whose communicators the log holds (each once)."""
    return sorted({comm["rank"] for comm in facts["comms"].values()})


def findings(facts: dict) -> list[str]:
    """What the facts say is wrong, one sentence each (an empty list: nothing this reader knows
    of). Each is a reason measured bandwidth falls short of the NICs' or NVLink's, or a hang in
    a communicator's start."""
    said, comms = [], facts["comms"]
    nodes = max((c["nodes"] for c in comms.values()), default=1)
    if nodes > 1 and "Socket" in facts["network"]:
        said.append(
            "ranks on different nodes talk over TCP (Using network Socket, NET/Socket): NCCL "
            "found no InfiniBand or RoCE device or plugin, so busbw will be a fraction of the "
            "NICs'; look at NCCL_IB_DISABLE, NCCL_NET and whether the network plugin loaded."
        )
    staged = sum(
        n
        for kind, n in facts["links"].items()
        if kind.startswith("NET/") and kind != "NET/Socket" and "GDRDMA" not in kind
    )
    if staged:
        said.append(
            f"{staged} network links without GPUDirect RDMA (no /GDRDMA): each message is "
            "staged through host memory; look at the nvidia-peermem module and the PCIe "
            "topology (NCCL_NET_GDR_LEVEL)."
        )
    if facts["links"]["SHM"]:
        said.append(
            f"{facts['links']['SHM']} links between GPUs of one node go through host memory "
            "(SHM), not peer to peer: NCCL_P2P_DISABLE is set, the PCIe switches (ACS) or the "
            "IOMMU forbid P2P, or the GPUs hang off different CPU sockets; NVLink is not used."
        )
    stuck = sorted(set(comms) - facts["complete"])
    if stuck:
        named = ", ".join(
            f"rank {comms[key]['rank']} of {comms[key]['ranks']} ({key[0]}, pid {key[1]})"
            for key in stuck
        )
        said.append(
            f"{named} began creating a communicator and never printed Init COMPLETE: the "
            "hang is in its start (a rank that never arrived, or a bootstrap that cannot "
            "connect), before any collective."
        )
    else:
        expected = max((c["ranks"] for c in comms.values()), default=0)
        seen = {c["rank"] for c in comms.values() if c["ranks"] == expected}
        if len(seen) < expected:
            said.append(
                f"the log holds {len(seen)} of {expected} ranks: read every node's log "
                "(NCCL_DEBUG_FILE=nccl.%h.%p writes one file a process)."
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
    """The INFO lines a ring of `nodes` x `gpus` ranks prints as its communicator starts and at
    its first collective, made from NCCL's format strings (not recorded on any machine): inside
    a node each rank sends to the next over NVLink (P2P/CUMEM) or, with `p2p` off, through host
    memory (SHM); the last GPU of a node sends to the next node's first over `network` ("IB" or
    "Socket"). Simplified: NCCL's rings over several NICs cross nodes from another GPU on each
    channel."""
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
        # at the first collective (NCCL_RUNTIME_CONNECT): a line a channel
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
    version = printf(
        FORMATS["line"], "node0", 4000, 4100, 0, "NCCL version 2.30.1+cuda12.9"
    )
    return "\n".join([version] + lines) + "\n"
