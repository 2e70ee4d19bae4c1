"""Each rank reports how it was started: its command line, whether torch (and torch._dynamo)
were imported before its target ran (forked from torchrun's agent), and its signal handlers."""

import signal
import sys

import psutil

import zerobook as zb

preloaded = "torch" in sys.modules  # before this file imported anything of torch
dynamo = "torch._dynamo" in sys.modules  # what a torch.optim optimizer imports
me = zb.setup(verbose=False)
zb.report(
    **{
        "cmdline": psutil.Process().cmdline(),
        "name": psutil.Process().name(),
        "parent_name": psutil.Process().parent().name(),
        "torch_preloaded": preloaded,
        "dynamo_preloaded": dynamo,
        "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
        "sigint_python": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    }
)
