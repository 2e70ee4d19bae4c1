"""A rank script that forges its result and ends the process early (--how os_exit | sys_exit),
and reports whether it could find its own finish token among the run's files."""

import argparse
import json
import os
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--how", choices=["os_exit", "sys_exit"], required=True)
how = parser.parse_args().how
rank, folder = os.environ["RANK"], Path(os.environ["ZEROBOOK_REPORT_DIR"])
seen = sorted(p.name for p in folder.glob(f".token{rank}.*"))
(folder / f"rank{rank}.json").write_text(
    json.dumps({"score": 100, "tokens_seen": seen})
)  # forged
print(f"tokens seen: {seen}", flush=True)
if how == "os_exit":
    os._exit(0)
sys.exit()
