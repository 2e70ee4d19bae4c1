"""make test's factory of launcher zygotes (tests/kernel_preload.py starts it, as the launcher
starts its zygote: zerobook.launcher.zygote.Zygote, with the environment a notebook kernel's
launch gives its zygote): it imports what the launcher's zygote imports and nothing more, then,
for each kernel that asks (tests/kernel_preload_main.py, on a Unix socket whose abstract
address is in ADDRESS_ENV), forks a zygote (zerobook.launcher.zygote_main.serve on the line the
kernel sent, in its own session, no input or output: as the launcher's Popen starts one) and
answers its pid and the environment its torch was imported with. It ends with the test worker
(its line, argv[1], reads EOF).
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys

ADDRESS_ENV = "ZEROBOOK_TEST_ZYGOTE_FACTORY"
ROOM_ENV = (
    "ZEROBOOK_ZYGOTE_ROOM"  # zerobook.launcher.zygote's (this process was started so)
)


def main(worker: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the launcher's zygote
    # listening first: a kernel that asks while torch is imported waits for the answer
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind("\0" + os.environ.pop(ADDRESS_ENV))
    listener.listen()
    env = {k: v for k, v in os.environ.items() if k != ROOM_ENV}  # as it was started
    from zerobook.launcher import agent
    from zerobook.launcher.zygote_main import serve

    agent.preload()  # what zygote_main.serve imports first
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the zygotes are reaped as they end
    while True:
        ready, _, _ = select.select([worker, listener], [], [])
        if worker in ready:
            return  # the test worker is gone (its line reads EOF; it never writes)
        conn, _ = listener.accept()
        with conn:
            try:
                _, fds, _, _ = socket.recv_fds(conn, 64, 1)
            except OSError:
                continue
            if len(fds) != 1:
                continue
            pid = os.fork()
            if pid == 0:
                listener.close(), conn.close(), os.close(worker)
                _zygote(fds[0], serve)
            os.close(fds[0])
            try:  # a kernel that stopped waiting has gone (its zygote reads EOF and ends)
                conn.send(json.dumps({"pid": pid, "env": env}).encode())
            except OSError:
                continue


def _zygote(line: int, serve) -> None:
    """The launcher's zygote, as `Popen(..., stdin=DEVNULL, stdout=DEVNULL,
    start_new_session=True)` starts it, serving on `line`."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0), os.dup2(null, 1), os.close(null)
        serve(line)
    finally:
        os._exit(0)


if __name__ == "__zygote__":
    main(int(sys.argv[1]))
