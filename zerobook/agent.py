"""What torchrun's agent runs before torchrun's main, in every launch: the command
(zerobook.launch.PRELOAD_AND_RUN_TORCHRUN) runs `preload()` then torchrun's main as
`python -m torch.distributed.run` does; a zygote (zerobook.zygote) runs `preload()` once and
forks the agents. Standard library and torch only: a grading sandbox's agent runs it too.

`preload` imports torch and torch._dynamo (what a rank's torch.optim imports), so the ranks,
forked from the agent, start with them.

Left as torchrun has it: its rendezvous names the caller of each event it records with
`inspect.stack()` (`get_method_name` in torch/distributed/elastic/rendezvous/
dynamic_rendezvous.py, nine times a launch, for a name the default null handler drops), which
searches every loaded module for every frame (CPython issue 92041): with torch._dynamo's
~2,000 modules loaded, ~0.3 CPU-s a launch. Giving the same name from `sys._getframe` halved a
3-rank launch's CPU, but under load gloo's connectFullMesh then failed ("Connection closed by
peer") in 9 of 60 3-rank launches, against 0 of 60 without it: a race that the slower start
hid, not found.
"""

from __future__ import annotations


def preload() -> None:
    """Import what every agent and rank imports."""
    import torch._dynamo  # noqa: F401 - what a rank's torch.optim imports
