"""zerobook: the code behind "ZeRO from scratch".

The notebook side launches runs (`torchrun`) and plots; the rank side (`setup`, `report`) runs
inside each torchrun process. Everything is loaded on first use (PEP 562), so `import zerobook as
zb` imports neither torch nor matplotlib, a rank never loads the launcher, and every module is
still one attribute away: `zb.zero.ShardedOptimizer`, `zb.accounting.memory.model_state_bytes`, `zb.torchrun`.
"""

import importlib
import pkgutil

from zerobook import _lazy_iri, _moved

_moved.install()  # the names modules had before they moved into a room (zerobook/_moved.py)
_lazy_iri.install()  # jsonschema's IRI grammar built when first used (zerobook/_lazy_iri.py)

__version__ = "0.1.0"
# every module and package of the folder (none is imported until it is asked for)
SUBMODULES = {
    module.name
    for module in pkgutil.iter_modules(__path__)
    if not module.name.startswith("_")
} | set(_moved.MOVED)
ATTRIBUTES = {  # name -> the module it comes from
    "Rank": "zerobook.launcher.dist",
    "setup": "zerobook.launcher.dist",
    "report": "zerobook.launcher.dist",
    "torchrun": "zerobook.launcher.launch",
    "LaunchError": "zerobook.launcher.launch",
    "RunResult": "zerobook.launcher.launch",
}
__all__ = sorted(ATTRIBUTES) + sorted(SUBMODULES)


def __getattr__(name: str):
    """Load a submodule or one of the names above the first time it is asked for."""
    if name in ATTRIBUTES:
        value = getattr(importlib.import_module(ATTRIBUTES[name]), name)
    elif name in SUBMODULES:
        value = importlib.import_module(f"zerobook.{name}")
    else:
        raise AttributeError(f"module 'zerobook' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
