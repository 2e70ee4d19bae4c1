"""jsonschema's IRI checker, built when it is first used rather than when jsonschema is imported.

nbformat (which `glue`, nbgrader, nbval and JupyterLab import) imports jsonschema, whose format
checkers import `rfc3987_syntax` where it is installed (jsonschema's `format-nongpl` extra, which
jupyter-events asks for). That module builds an Earley parser of RFC 3987's grammar at import:
~2.5 CPU seconds here, in every process that reads a notebook (48 of them in one `make test`),
for a check of the "iri" and "iri-reference" formats that no notebook schema uses (jsonschema
issue 1428; its fork rfc3987-syntax2 loads lazily, and is not on our package index).

`install()` puts a stand-in under that name: `is_valid_syntax`, the one name jsonschema imports,
and any other attribute, import the real module on first use, so what a check returns is
unchanged. It does nothing where the module is missing or already imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types

NAME = "rfc3987_syntax"
_FIRST_USE = threading.Lock()  # two threads checking at once import it once


def _real() -> types.ModuleType:
    """The real module: the stand-in leaves sys.modules, the real one is imported in its place."""
    with _FIRST_USE:
        module = sys.modules.get(NAME)
        if isinstance(module, _StandIn):
            del sys.modules[NAME]
            try:
                module = importlib.import_module(NAME)
            except ImportError:  # the stand-in again: each use fails as this one did
                sys.modules[NAME] = module
                raise
        return module


class _StandIn(types.ModuleType):
    def __getattr__(self, name: str):
        # the import system's questions (hasattr(m, "__path__"), ...) import nothing
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real(), name)


def is_valid_syntax(term: str, value: str) -> bool:
    """rfc3987_syntax.is_valid_syntax, the grammar built on the first call. Where the real module
    cannot be imported (its parser library missing), jsonschema would have had no IRI checker:
    every value passes, as then."""
    try:
        real = _real()
    except ImportError:
        return True
    return real.is_valid_syntax(term, value)


def install() -> None:
    if NAME in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(NAME)
    except (ImportError, ValueError):
        return
    if spec is None:
        return
    stand_in = _StandIn(NAME, __doc__)
    stand_in.__spec__, stand_in.__file__ = spec, spec.origin
    stand_in.__path__ = spec.submodule_search_locations  # a package, as the real one is
    stand_in.is_valid_syntax = is_valid_syntax
    sys.modules[NAME] = stand_in
