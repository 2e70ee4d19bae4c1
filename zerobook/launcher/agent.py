"""What torchrun's agent runs before torchrun's main, in every launch: the command
(zerobook.launcher.command.PRELOAD_AND_RUN_TORCHRUN) runs `preload()` then torchrun's main as
`python -m torch.distributed.run` does; a zygote (zerobook.launcher.zygote) runs `preload()` once and
forks the agents. Standard library and torch only: a grading sandbox's agent runs it too.

`preload` imports torch and torch._dynamo (what a rank's torch.optim imports), so the ranks,
forked from the agent, start with them.

`preload` also mends one thing in torchrun: its rendezvous names the caller of each event it
records with `inspect.stack()` (`get_method_name` in
torch/distributed/elastic/rendezvous/dynamic_rendezvous.py), nine times a launch, and the name
is then dropped (the event handler is a null one unless configured). `inspect.stack()` reads
the source of every frame on the stack and, for each, searches every loaded module
(`inspect.getmodule`, CPython issue 92041): with torch._dynamo's ~2,000 modules loaded, about
0.3 CPU-s per launch. `method_name` returns the same name from the frame itself.
"""

from __future__ import annotations

import sys


def method_name(depth: int = 2) -> str:
    """The name of the function `depth` frames above this one (0: this one), as torchrun's
    `get_method_name(depth)` gives it from `inspect.stack()[depth]`."""
    try:
        return sys._getframe(depth).f_code.co_name
    except ValueError:  # a shallower stack
        return "no_method_name"


def preload() -> None:
    """Import what every agent and rank imports, and mend torchrun's `get_method_name`."""
    import torch._dynamo  # noqa: F401 - what a rank's torch.optim imports
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous

    dynamic_rendezvous.get_method_name = method_name
