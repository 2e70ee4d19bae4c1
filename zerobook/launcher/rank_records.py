"""Rank side: what a rank that failed leaves in the run's folder for the launcher
(zerobook.launcher.failures reads it): its exception, or the signal that ended it (written by its watcher,
since a rank killed by a signal can write nothing); an earlier attempt's records are forgotten.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from zerobook.launcher.dist import REPORT_DIR_ENV, write_atomically, this_rank


def record_failure(
    summary: str, traceback_text: str, collective: str | None = None
) -> None:
    """Leave this rank's failure (with a timestamp, to find the first one) for the launcher.

    collective: the torch.distributed call it failed in, if any ("all_reduce", "send", ...).
    """
    folder = os.environ.get(REPORT_DIR_ENV)
    if folder:
        record = {
            "rank": this_rank(),
            "time": time.time(),
            "summary": summary,
            "traceback": traceback_text,
            "collective": collective,
        }
        write_atomically(
            Path(folder) / f"rank{this_rank()}.error.json", json.dumps(record)
        )


def record_signal_death(signal_name: str) -> None:
    """Leave the signal that ended this rank (e.g. "SIGSEGV"): written by the rank's parent, its
    watcher (zerobook.launcher.rank_entry, zerobook.launcher.rank_fresh), since a rank killed by a signal can write
    nothing."""
    folder = os.environ.get(REPORT_DIR_ENV)
    if folder:
        record = {"rank": this_rank(), "time": time.time(), "signal": signal_name}
        write_atomically(
            Path(folder) / f"rank{this_rank()}.signal.json", json.dumps(record)
        )


def forget_failure() -> None:
    """Remove this rank's failure records and report, if an earlier attempt of the run (torchrun
    --max-restarts) left them: what a run returns is its last attempt's."""
    folder = os.environ.get(REPORT_DIR_ENV)
    if folder:
        for name in ("error.json", "signal.json", "json"):
            (Path(folder) / f"rank{this_rank()}.{name}").unlink(missing_ok=True)
