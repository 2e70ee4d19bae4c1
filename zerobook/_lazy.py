"""A room's modules one attribute away, loaded on first use (PEP 562): `zb.accounting.memory`
imports zerobook.accounting.memory the first time it is asked for, and nothing before."""

from __future__ import annotations

import importlib
import pkgutil


def submodules(package: str, path) -> tuple:
    """(__getattr__, __dir__) for the package `package` whose folder is `path`."""
    names = {m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_")}

    def __getattr__(name: str):
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(names | set(vars(importlib.import_module(package))))

    return __getattr__, __dir__
