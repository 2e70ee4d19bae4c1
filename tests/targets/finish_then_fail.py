"""Every rank but --rank finishes at once; --rank fails a second later, after them."""

import argparse
import time

import zerobook as zb

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int, default=1)
cli = parser.parse_args()
me = zb.setup(verbose=False)
zb.report(ok=True)
if me.rank == cli.rank:
    time.sleep(1)
    raise ValueError(f"rank {me.rank} fails after its peers finished")
