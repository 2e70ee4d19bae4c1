"""Each rank leaves a folder and a file in the temporary directory, as a careless script
does, and reports where; the rank named by --rank then raises (torch's error handler writes
a pytorch-errorfile-* there too)."""

import argparse
import tempfile

import zerobook as zb

parser = argparse.ArgumentParser()
parser.add_argument("--rank", type=int, default=-1)
me = zb.setup(verbose=False)
folder = tempfile.mkdtemp(prefix="left-behind-")
with tempfile.NamedTemporaryFile(delete=False, prefix="left-behind-") as f:
    f.write(b"x")
zb.report(folder=folder, file=f.name, tempdir=tempfile.gettempdir())
if me.rank == parser.parse_args().rank:
    raise RuntimeError("this rank fails after leaving its files")
