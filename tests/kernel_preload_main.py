"""The zygote of make test's notebook kernels (tests/kernel_preload.py starts it by path, as
zerobook.launcher.zygote starts the launcher's): zerobook.launcher.zygote_main.serve with what a
chapter's kernel imports (PRELOAD) and ipykernel's main in place of torchrun's.

Only other projects' modules are preloaded: the course's own keep import-time state of their
process (zerobook.launcher.zygote notes its owner's pid), so each kernel imports them itself.
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys

# what a chapter's kernel has loaded by its end (sys.modules of zero2, ring_allreduce,
# when_zero_pays): ipykernel's, torch's, matplotlib's, glue's; not matplotlib's inline backend,
# which hooks itself into the IPython it finds when imported (here there is none yet)
PRELOAD = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "torch",
    "torch.distributed",
    "torch.nn",
    "torch.optim",
    "numpy",
    "matplotlib.pyplot",
    "PIL.Image",
    "IPython.display",
    "myst_nb.ext.glue",
    "nbformat",
)
# what ipykernel's app sets before a notebook runs, and matplotlib reads when imported
INLINE = "module://matplotlib_inline.backend_inline"


def preload() -> None:
    os.environ.setdefault("MPLBACKEND", INLINE)
    for name in PRELOAD:
        importlib.import_module(name)


def run(argv: list[str]) -> None:
    """`python -m ipykernel_launcher -f CONNECTION_FILE`, as that command runs it."""
    if argv[1:3] != ["-m", "ipykernel_launcher"]:
        raise SystemExit(
            f"kernel_preload_main runs ipykernel_launcher only, not {argv}"
        )
    sys.argv = [argv[0], *argv[3:]]
    sys.path[0] = os.getcwd()  # `-m` puts the directory it was started in first
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


if __name__ == "__zygote__":
    from zerobook.launcher.zygote_main import serve

    serve(int(sys.argv[1]), preload, run)
