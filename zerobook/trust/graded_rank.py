"""What a graded rank may not do: start a process, or be read by the other ranks.

    confine()   # zerobook.launcher.rank_entry, in each rank of a grading sandbox, before the lab runs

A lab's harness imports the student's file into the rank's own process, so what the harness
records can only be trusted if nothing else of the run can rewrite it once the rank has
written it. Two of the kernel's own switches make that so, for the rest of the rank's life:

- **No new process.** A seccomp filter fails fork, vfork and every clone that is not a
  thread with EPERM (clone3 with ENOSYS, so that glibc makes its threads with clone): a
  process forked at import can no longer outlive its rank and rewrite the reports after
  the rank verified them. Threads (gloo's, torch's) are unaffected.
- **Not readable by its peers.** The rank is made non-dumpable: its /proc/PID/mem, fd/ and
  environ belong to root, so another rank (the same uid) cannot read its memory (the secret
  its finish token is signed with: zerobook.launcher.dist.mark_finished) nor write through its files.

Linux on x86-64 or arm64 only (grading's sandbox is Linux only); elsewhere `confine` says why
not in its return value and changes nothing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

GRADED_ENV = "ZEROBOOK_GRADED_RANKS"  # "1": the grading sandbox's ranks (zerobook.classroom.sandbox)
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 4, 38, 22
SECCOMP_MODE_FILTER = 2
CLONE_THREAD = 0x00010000
X32_SYSCALL_BIT = 0x40000000
# audit architecture, and the syscall numbers that make a process
ARCHES = {
    "x86_64": (0xC000003E, {"clone": 56, "fork": 57, "vfork": 58, "clone3": 435}),
    "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435}),
}
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]'s low half)


def wanted() -> bool:
    """True in a rank that a grading sandbox started (its launcher set GRADED_ENV)."""
    return os.environ.get(GRADED_ENV) == "1"


def no_new_process_filter(machine: str) -> bytes:
    """The BPF program (struct sock_filter[]): a syscall of another ABI fails; fork and
    vfork fail; clone fails unless its flags hold CLONE_THREAD; clone3 says ENOSYS."""
    arch, numbers = ARCHES[machine]
    deny, no_clone3 = ERRNO | errno.EPERM, ERRNO | errno.ENOSYS
    refused = [numbers[n] for n in ("fork", "vfork") if n in numbers]
    # (code, jump if true, jump if false, k); jumps count instructions skipped
    program = [(LD_W_ABS, 0, 0, ARCH), (JEQ_K, 1, 0, arch), (RET_K, 0, 0, deny)]
    program += [(LD_W_ABS, 0, 0, NR)]
    if machine == "x86_64":  # the x32 ABI's numbers: another way to call fork
        program += [(JGE_K, 0, 1, X32_SYSCALL_BIT), (RET_K, 0, 0, deny)]
    program += [(JEQ_K, 0, 1, numbers["clone3"]), (RET_K, 0, 0, no_clone3)]
    for number in refused:
        program += [(JEQ_K, 0, 1, number), (RET_K, 0, 0, deny)]
    program += [(JEQ_K, 1, 0, numbers["clone"]), (RET_K, 0, 0, ALLOW)]
    program += [(LD_W_ABS, 0, 0, ARG0), (JSET_K, 0, 1, CLONE_THREAD)]
    program += [(RET_K, 0, 0, ALLOW), (RET_K, 0, 0, deny)]
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program)


def undumpable() -> None:
    """This process's memory and files unreadable by the other processes of its uid (its
    /proc entries root's): the rank's watcher, which keeps a secret (zerobook.trust.witness)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def confine() -> str | None:
    """Make this process non-dumpable and unable to start processes (see above); None
    once done, else why it could not be (nothing is changed then)."""
    machine = platform.machine()
    if not sys.platform.startswith("linux") or machine not in ARCHES:
        return (
            f"no confinement on {sys.platform}/{machine}: Linux on x86-64 or arm64 only"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    program = no_new_process_filter(machine)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("HxxxxxxP", len(program) // 8, ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    steps = [
        (PR_SET_DUMPABLE, 0, 0),
        (PR_SET_NO_NEW_PRIVS, 1, 0),
        (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog_buffer)),
    ]
    for option, first, second in steps:
        prctl = libc.prctl
        prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
        if prctl(option, first, second, 0, 0) != 0:
            return f"prctl({option}) failed: {os.strerror(ctypes.get_errno())}"
    return None
