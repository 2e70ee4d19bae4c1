"""A rank whose script registers an exit handler and a finalizer, as a careful script does:
each writes a file into the folder given, when the rank ends normally."""

import atexit
import sys
import weakref
from pathlib import Path

import zerobook as zb

me = zb.setup(verbose=False)
folder = Path(sys.argv[1])


class Resource:
    pass


kept = Resource()  # alive until the end: its finalizer runs at exit
weakref.finalize(kept, (folder / f"finalized{me.rank}").touch)
atexit.register((folder / f"atexit{me.rank}").touch)
zb.report(rank=me.rank)
