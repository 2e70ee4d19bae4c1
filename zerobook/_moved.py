"""Old names of modules that moved into a room: `import zerobook.plots`, `zb.plots` and
`python -m zerobook.memory` keep working, and give the very module object of the new name
(`zerobook.figures.charts`): its code runs once, whichever name is imported first.

A module split when it moved keeps its old name on the part that kept most of it; imported by
its old name, that part is given a `__getattr__` (PEP 562) that finds the names that went to its
siblings (SPLIT), so `zb.plots.PALETTE` still works; the new names are the ones to use.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

# old name -> new name, both under zerobook. (Each room's __init__.py is its map.)
MOVED = {
    "plots": "figures.charts",
    "diagrams": "figures.diagrams",
    "widgets": "figures.widgets",
    "gpu_plots": "figures.gpu",
    "capstone_plots": "figures.capstone",
    "memory": "accounting.memory",
    "traffic": "accounting.traffic",
    "zero_paper": "accounting.zero_paper",
    "hardware": "accounting.hardware",
    "launch": "launcher.launch",
    "zygote": "launcher.zygote",
    "zygote_main": "launcher.zygote_main",
    "agent": "launcher.agent",
    "rank_entry": "launcher.rank_entry",
    "rank_fresh": "launcher.rank_fresh",
    "rank_output": "launcher.rank_output",
    "rank_records": "launcher.rank_records",
    "failures": "launcher.failures",
    "lifetime": "launcher.lifetime",
    "lifeline": "launcher.lifeline",
    "run_processes": "launcher.run_processes",
    "start_method": "launcher.start_method",
    "dist": "launcher.dist",
    "cluster": "launcher.cluster",
    "ddp": "data_parallel.ddp",
    "collectives": "data_parallel.collectives",
    "comm": "data_parallel.comm",
    "inflight": "data_parallel.inflight",
    "bucket_events": "labs.bucket_events",
    "zero_events": "labs.zero_events",
    "zero_held": "labs.zero_held",
    "zero_probe": "labs.zero_probe",
    "zero3_events": "labs.zero3_events",
    "zero3_record": "labs.zero3_record",
    "capstone_checks": "labs.capstone_checks",
    "capstone_resume": "labs.capstone_resume",
    "freed": "labs.freed",
    "models": "train.models",
    "text": "train.text",
    "training": "train.training",
    "training_methods": "train.training_methods",
    "precision": "train.precision",
    "measure": "train.measure",
    "parity": "train.parity",
    "recompute": "train.recompute",
    "sharded_checkpoint": "train.sharded_checkpoint",
    "capstone_train": "train.capstone_train",
    "answers": "pages.answers",
    "glue": "pages.glue",
    "saved": "pages.saved",
    "gpu_record": "pages.gpu_record",
    "graded_rank": "trust.graded_rank",
    "report_guard": "trust.report_guard",
    "witness": "trust.witness",
    "untrusted": "trust.untrusted",
}
# a split module's new name -> the siblings that took some of its names
SPLIT = {
    "figures.charts": (
        "figures.style",
        "figures.ring",
        "figures.timelines",
        "figures.predictions",
    ),
    "figures.diagrams": ("figures.timelines", "figures.reports"),
    "figures.widgets": ("figures.step_explorer",),
    "accounting.memory": (
        "accounting.recipes",
        "accounting.activations",
        "accounting.deepspeed_estimates",
        "accounting.traffic",
    ),
}


class OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The finder and loader of the old names: the module of the new name, imported once."""

    def find_spec(self, fullname, path=None, target=None):
        short = fullname.removeprefix("zerobook.")
        if fullname.startswith("zerobook.") and short in MOVED:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(new_name(spec.name))
        # the import system sets the old name's spec on it next: kept here to give it back
        spec.loader_state = module.__spec__
        siblings = SPLIT.get(module.__name__.removeprefix("zerobook."))
        if siblings and "__getattr__" not in vars(module):
            module.__getattr__ = forwarded(module.__name__, siblings)
        return module

    def exec_module(self, module) -> None:
        """Nothing runs: the module ran under its new name; its spec is given back to it."""
        module.__spec__ = module.__spec__.loader_state

    def get_code(self, fullname):
        """`python -m zerobook.<old>` runs the new module's code as __main__ (runpy)."""
        real = importlib.util.find_spec(new_name(fullname))
        return real.loader.get_code(real.name)


def forwarded(name: str, siblings: tuple[str, ...]):
    """A module `__getattr__` that finds a name in the first sibling that has it."""

    def __getattr__(attribute: str):
        for sibling in siblings:
            module = importlib.import_module(f"zerobook.{sibling}")
            if attribute in vars(module):
                return vars(module)[attribute]
        raise AttributeError(f"module {name!r} has no attribute {attribute!r}")

    return __getattr__


def new_name(old: str) -> str:
    return "zerobook." + MOVED[old.removeprefix("zerobook.")]


def install() -> None:
    if not any(isinstance(f, OldNames) for f in sys.meta_path):
        # first: before any finder that might find a stale copy of an old module
        sys.meta_path.insert(0, OldNames())


def current_name(module: str) -> str:
    """The dotted name of a module of the package today, however it is given: by name, new or
    old ("zerobook.train.capstone_train", "capstone_train"), or by its file's path in the
    package's folder, new or old ("train/capstone_train.py", "capstone_train.py"; "zerobook/"
    before it or not)."""
    name = module.removesuffix(".py").replace("/", ".").removeprefix("zerobook.")
    return new_name(name) if name in MOVED else f"zerobook.{name}"


def package_path(module: str) -> str:
    """The path under zerobook/ of `module`'s file (any form `current_name` takes), e.g.
    "train/capstone_train.py"; a package's is its __init__.py."""
    parts = current_name(module).split(".")[1:]
    if Path(__file__).parent.joinpath(*parts).is_dir():
        return "/".join([*parts, "__init__.py"])
    return "/".join(parts) + ".py"
