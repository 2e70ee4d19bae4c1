"""Each rank reports how it was started: its command line, whether torch (and torch._dynamo)
were imported before its target ran (forked from torchrun's agent), its signal handlers, the
processes above it, the run's id as its process shows it (/proc) and as Python reads it, and
where its agent's rendezvous takes the names of its callers from."""

import faulthandler
import os
import signal
import sys

import psutil

import zerobook as zb

preloaded = "torch" in sys.modules  # before this file imported anything of torch
# what a notebook's kernel loads and a rank never does (its zygote has none of it either)
kernel_side = sorted(
    m for m in ("IPython", "ipykernel", "matplotlib", "zmq") if m in sys.modules
)
dynamo = "torch._dynamo" in sys.modules  # what a torch.optim optimizer imports
me = zb.setup(verbose=False)
from torch.distributed import distributed_c10d as c10d  # noqa: E402 - after the checks above
from torch.distributed.elastic.rendezvous import dynamic_rendezvous  # noqa: E402

zb.report(
    **{
        "cmdline": psutil.Process().cmdline(),
        "name": psutil.Process().name(),
        "parent_name": psutil.Process().parent().name(),
        "torch_preloaded": preloaded,
        "kernel_side_loaded": kernel_side,
        # PYTHONFAULTHANDLER=1 (command.run_env): set when its zygote's interpreter started
        "faulthandler": faulthandler.is_enabled(),
        "dynamo_preloaded": dynamo,
        "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
        "sigint_python": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
        "ancestors": [p.pid for p in psutil.Process().parents()],
        "shown_run_id": psutil.Process().environ().get("ZEROBOOK_RUN_ID"),
        "run_id": os.environ.get("ZEROBOOK_RUN_ID"),
        "cuda_check": os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"),
        # torch ended init_process_group with its barrier on the store (its own reading)
        "init_barrier": c10d._is_barrier_after_init(),
        # the agent's (the rank is its fork): torchrun's, or zerobook.launcher.agent's mended one
        "method_name_from": dynamic_rendezvous.get_method_name.__module__,
    }
)
