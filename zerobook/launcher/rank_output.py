"""Notebook side: torchrun's combined output, split by rank (`--tee` tags each rank's lines
`[defaultR]:`): each rank's lines are echoed tagged `[rankR]` and kept; torchrun's own lines are
kept, not shown; a rank that floods is cut, keeping its last lines for the error message."""

from __future__ import annotations

import re
from collections import deque

from zerobook.launcher.failures import TAIL_LINES

RANK_LINE = re.compile(
    r"^\[default(\d+)\]:(.*)$"
)  # torchrun --tee tags lines with the local rank
MAX_LINE_CHARS = 2_000  # a longer line is cut, saying how much was cut
MAX_RANK_BYTES = (
    1_000_000  # what one rank may show and keep; then only its last lines are kept
)
LIBRARY_LOG = re.compile(
    r"^(USDT|STAGE):\S+ \S+ \d+:\d+ \w+\.cpp:\d+\]"
)  # the profiler's own start/stop log
# torchrun's own lines (and the library logs diverted to them) kept: the last ones, where its
# summary of the run is; a rank printing library-log lines cannot grow the grader's memory
MAX_AGENT_LINES = 5_000
NO_HOSTNAME = re.compile(
    r"^\[W\d+ [\d:.]+ (\d+ )?socket\.cpp:\d+\] \[c10d\] The hostname of the client socket "
    r"cannot be retrieved\. err=-?\d+$"
)  # gloo in a sandbox without DNS (grading): noise


class RankOutput:
    """Splits torchrun's output by rank, echoes rank lines tagged `[rankR]`, keeps the rest."""

    def __init__(self, echo: bool):
        self.echo, self.log, self.ranks = echo, [], {}
        self.agent: deque = deque(
            maxlen=MAX_AGENT_LINES
        )  # torchrun's own lines, the last ones
        self.returncode: int | None = None
        self.shown: dict[
            int, int
        ] = {}  # bytes of each rank's output shown and kept so far
        self.last: dict[
            int, deque
        ] = {}  # each rank's last lines, kept past the limit (for errors)

    def add(self, line: str) -> None:
        line = line.rstrip("\r")
        match = RANK_LINE.match(line)
        if not match:  # torchrun's own banners and summaries: kept, not shown
            self.agent.append(cut(line))
            return
        rank, text = int(match.group(1)), match.group(2)
        text = re.sub(rf"^\[rank{rank}\]: ?", "", text)  # torch tags some lines itself
        if LIBRARY_LOG.match(text) or NO_HOSTNAME.match(text):
            self.agent.append(cut(line))  # kept, not shown, like torchrun's banners
            return
        text = cut(text)
        self.last.setdefault(rank, deque(maxlen=200)).append(text)  # a stack dump fits
        before = self.shown.get(rank, 0)
        self.shown[rank] = before + len(text) + len(f"[rank{rank}] ") + 1  # as echoed
        if before > MAX_RANK_BYTES:
            return
        if self.shown[rank] > MAX_RANK_BYTES:
            text = f"[output cut: rank {rank} printed more than {MAX_RANK_BYTES:,} bytes; only its last lines are kept]"
        self.ranks.setdefault(rank, []).append(text)
        tagged = f"[rank{rank}] {text}"
        self.log.append(tagged)
        if self.echo:
            print(tagged, flush=True)

    def tail(self, rank: int, n: int = TAIL_LINES) -> str:
        return "\n".join(list(self.last.get(rank, []))[-n:])


def cut(text: str) -> str:
    """`text`, cut at MAX_LINE_CHARS, saying how much was cut."""
    if len(text) <= MAX_LINE_CHARS:
        return text
    return f"{text[:MAX_LINE_CHARS]} ... [{len(text) - MAX_LINE_CHARS:,} more characters cut]"
