"""What torchrun starts for each rank on the fresh path (zerobook.launcher.start_method): a watcher that
starts its rank as a new interpreter and tags every line the rank prints.

    python -m torch.distributed.run ... --module zerobook.launcher.rank_fresh TARGET [ARGS...]
      -> this watcher -> python -u -m zerobook.launcher.rank_entry --started-fresh TARGET [ARGS...]

The watcher does on every platform what the fork path gets from Linux and torchrun's `--tee`:
  - each line of the rank's output (stdout and stderr, as the rank writes them, C libraries and a
    crash's faulthandler stack included) goes to torchrun's output tagged `[defaultR]:`, as
    torchrun's tee tags it (zerobook.launcher.rank_output reads both alike), in one write a line;
  - the signals torchrun sends (SIGTERM, SIGINT, ...) are passed on to the rank;
  - a rank ended by a signal is recorded (`rank{R}.signal.json`) before the watcher ends by it;
  - the watcher kills its rank when the agent is gone, and the rank kills itself when its
    watcher is gone (zerobook.launcher.lifeline): no parent-death signal is needed.
Standard library and psutil only (no torch): it starts in milliseconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from zerobook.launcher import lifeline
from zerobook.launcher.dist import env_int
from zerobook.launcher.rank_records import record_signal_death
from zerobook.launcher.rank_entry import PASSED_ON, STARTED_FRESH


PIECE = 1 << 16  # a line longer than this is passed on in pieces


def tagged(prefix: bytes, lines: list[bytes]) -> bytes:
    """Each line with its rank's tag, newline-ended."""
    return b"".join(prefix + line + b"\n" for line in lines)


def relay(fd: int, prefix: bytes, out: int = 1) -> None:
    """Read the rank's output until it closes its end; write it on, line by line, tagged."""
    pending = b""
    while True:
        chunk = os.read(fd, PIECE)
        if not chunk:
            break
        *complete, pending = (pending + chunk).split(b"\n")
        if len(pending) > PIECE:
            complete, pending = [*complete, pending], b""
        for line in complete:  # one write a line: other ranks' lines never cut into it
            os.write(out, tagged(prefix, [line]))
    if pending:
        os.write(out, tagged(prefix, [pending]))


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit("usage: python -m zerobook.launcher.rank_fresh TARGET [ARGS...]")
    lifeline.note_pid("watcher")
    rank = subprocess.Popen(
        [
            sys.executable,
            "-u",
            "-m",
            "zerobook.launcher.rank_entry",
            STARTED_FRESH,
            *argv,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )

    def pass_on(number, _frame):
        try:
            rank.send_signal(number)
        except ProcessLookupError:
            pass

    def agent_gone():
        pass_on(signal.SIGKILL, None)
        os._exit(1)

    for number in PASSED_ON:
        signal.signal(number, pass_on)
    lifeline.hold(agent_gone)
    relay(rank.stdout.fileno(), f"[default{env_int('LOCAL_RANK', 0)}]:".encode())
    code = rank.wait()
    if code < 0:  # ended by a signal: say which, then end by it as the rank did
        number = -code
        record_signal_death(signal.Signals(number).name)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
