"""`import zerobook as zb` stays light, and every module is one attribute away (PEP 562)."""

import subprocess
import sys

import pytest

import zerobook as zb
from conftest import ROOT, TARGETS, pyproject
from zerobook._moved import MOVED


def test_every_module_and_name_is_reachable_from_zb():
    """Every module and package in zerobook/ (read from the folder, not from zb's own list) is
    `zb.<name>`, the very module `import zerobook.<name>` gives; run in a fresh process."""
    folder = ROOT / "zerobook"
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}
    modules |= {p.parent.name for p in folder.glob("*/__init__.py")}
    assert (
        modules | set(MOVED) == zb.SUBMODULES
    )  # and the old names (tests/test_moved.py)
    code = (
        "import importlib, zerobook as zb; print([n for n in sorted(zb.SUBMODULES) "
        "if getattr(zb, n) is not importlib.import_module('zerobook.' + n)])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]
    for name in zb.ATTRIBUTES:
        assert getattr(zb, name) is not None, name
    assert zb.zero.ShardedOptimizer.__name__ == "ShardedOptimizer"
    assert set(zb.__all__) <= set(dir(zb))
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        zb.nonexistent  # noqa: B018


ROOMS = sorted(
    p.parent.name
    for p in (ROOT / "zerobook").glob("*/__init__.py")
    if "submodules(__name__, __path__)" in p.read_text()
)


def test_every_module_of_a_room_is_one_attribute_away():
    """`zb.accounting.memory`, `zb.figures.charts`: each module of a room (zerobook/_lazy.py) is
    an attribute of it, the very module its name imports; fresh process, nothing loaded first."""
    assert {"accounting", "figures"} <= set(ROOMS)
    code = (
        "import importlib, pkgutil, sys, zerobook as zb\n"
        "bad = []\n"
        "for room in sys.argv[1:]:\n"
        "    package = getattr(zb, room)\n"
        "    for m in pkgutil.iter_modules(package.__path__):\n"
        "        name = f'zerobook.{room}.{m.name}'\n"
        "        if m.name.startswith('_'):\n"
        "            continue\n"
        "        if getattr(package, m.name) is not importlib.import_module(name):\n"
        "            bad.append(name)\n"
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *ROOMS], cwd=ROOT, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


def test_importing_zerobook_loads_neither_torch_nor_the_launcher_nor_matplotlib():
    code = (
        "import sys, zerobook as zb; heavy = [m for m in ('torch', 'zerobook.launcher.launch', 'matplotlib') "
        "if m in sys.modules]; print(heavy); zb.zero.Zero3AdamW; zb.accounting.memory.GB; zb.torchrun"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_notebook_sides_figures_tables_and_launcher_load_no_torch():
    """A chapter's kernel imports torch only if the chapter uses it (about 1.3 CPU seconds)."""
    code = (
        "import sys, zerobook.figures.charts, zerobook.figures.diagrams, zerobook.figures.widgets, "
        "zerobook.figures.step_explorer, zerobook.launcher.launch, zerobook.grading; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False", out.stdout + out.stderr


@pytest.mark.launch
def test_a_rank_loads_nothing_of_the_notebook_side():
    run = zb.torchrun(TARGETS / "modules.py", nproc=2, echo=False)
    assert [r["loaded"] for r in run.ranks] == [[], []]


PACKAGE = ROOT / "zerobook"
CLASSROOM = {
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for p in (PACKAGE / "classroom").rglob("*.py")
}  # the instructor's grading
NOTEBOOK_SIDE = {
    "zerobook.launcher.launch",
    "zerobook.launcher.command",
    "zerobook.launcher.supervisor",
    "zerobook.launcher.zygote",
    "zerobook.launcher.rank_output",
    "zerobook.launcher.failures",
    "zerobook.labs.capstone_checks",
    "zerobook.grading",
    "zerobook.launcher.cluster",
    "zerobook.run_cache",
    "zerobook.launcher.run_processes",
    "zerobook.doctor",
    "zerobook.__main__",
} | CLASSROOM
NOTEBOOK_SIDE |= {  # every picture, and what a page shows besides (zerobook/pages/__init__.py)
    ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for room in ("figures", "pages")
    for p in (PACKAGE / room).rglob("*.py")
}
NOTEBOOK_SIDE |= {
    f"zerobook.{old}"
    for old, new in MOVED.items()
    if f"zerobook.{new}" in NOTEBOOK_SIDE
}  # a moved module's old name too (zerobook/_moved.py)


def module_name(path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(
        ".__init__"
    )


def imported(path) -> set[str]:
    """The zerobook modules a file imports (`import zerobook.x`, `from zerobook.x import y`,
    `from zerobook import x`)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("zerobook")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "zerobook"
        ):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


RANK_SIDE = [
    p
    for p in PACKAGE.rglob("*.py")
    if module_name(p) not in NOTEBOOK_SIDE | {"zerobook"}
]


@pytest.mark.parametrize("path", RANK_SIDE, ids=lambda p: module_name(p))
def test_the_rank_side_never_imports_the_notebook_side(path):
    assert not imported(path) & NOTEBOOK_SIDE, imported(path) & NOTEBOOK_SIDE


# zerobook/labs/: one harness per lab, named as the lab's folder in labs/; the library modules
# every harness shares; and each lab's record and checks (what its run keeps, what its tests read)
HARNESSES = sorted(
    PACKAGE / "labs" / f"{lab.name}.py"
    for lab in (ROOT / "labs").iterdir()
    if lab.is_dir()
)
LAB_LIBRARY = (
    "harness",
    "student_state",
    "means",
    "weights_used",
    "crash",
    "hints",
    "new_groups",
)
LAB_RECORDS = (
    "bucket_events",
    "zero_probe",
    "zero_events",
    "zero_held",
    "zero3_record",
    "zero3_events",
    "freed",
    "capstone_checks",
    "capstone_resume",
    "zeropp_checks",
    "checkpoint_readback",
    "ring_chunks",
    "ring_held",
    "bug_zoo_story",
)


def test_every_module_of_the_labs_room_is_a_harness_the_library_or_a_record():
    kinds = {p.stem for p in HARNESSES} | set(LAB_LIBRARY) | set(LAB_RECORDS)
    assert all(p.is_file() for p in HARNESSES), HARNESSES
    assert {p.stem for p in (PACKAGE / "labs").glob("*.py")} - {"__init__"} == kinds


@pytest.mark.parametrize(
    "path",
    sorted((PACKAGE / "runs").glob("*.py")) + sorted((PACKAGE / "labs").glob("*.py")),
    ids=lambda p: module_name(p),
)
def test_runs_and_lab_harnesses_do_not_import_each_other(path):
    """What a run and a harness both need lives in a library module; a harness reads the
    records of the labs' room, no run does."""
    import importlib

    others = {
        i for i in imported(path) if i.startswith(("zerobook.runs.", "zerobook.labs."))
    }
    library = [f"zerobook.labs.{name}" for name in LAB_LIBRARY]
    records = {f"zerobook.labs.{name}" for name in LAB_RECORDS}
    allowed = set(library) | records if path.parent.name == "labs" else set()
    shared = {
        f"{module}.{n}"
        for module in library
        for n in vars(importlib.import_module(module))
        if not n.startswith("_")
    }  # what every harness shares
    # a module of the room, or a name imported from one
    outside = {
        i
        for i in others - shared
        if i not in allowed and i.rpartition(".")[0] not in allowed
    }
    assert not outside, outside


def test_no_graded_harness_touches_a_private_name():
    """Harnesses use public hook points only: renaming a private attribute cannot break a lab."""
    import ast

    touched = {}
    for path in HARNESSES:
        names = {
            n.attr
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Attribute)
            and n.attr.startswith("_")
            and not n.attr.startswith("__")
        }
        if names:
            touched[path.name] = names
    assert not touched


def test_the_hook_points_the_labs_use_exist():
    """The public names the lab harnesses and the students' docstrings rely on, pinned: a refactor
    that renames one fails here in a second, not in the grading round trip."""
    from zerobook.zero import Zero2AdamW, Zero3
    from zerobook.zero.units import Unit

    for name in (
        "on_grad",
        "launch",
        "flat",
        "grad_shard",
        "in_flight",
        "max_in_flight",
        "finish_backward",
    ):
        assert (
            hasattr(Zero2AdamW, name) or name in Zero2AdamW.__init__.__code__.co_names
        ), name
    for name in ("where", "offset", "buffers", "arrived"):  # set in __init__
        assert name in Zero2AdamW.__init__.__code__.co_names, name
    for name in (
        "before_forward",
        "log",
        "forward_order",
        "events",
        "units",
        "gather_all",
        "persistent_tensors",
    ):
        assert hasattr(Zero3, name) or name in Zero3.__init__.__code__.co_names, name
    for name in (
        "start_gather",
        "wait_gather",
        "free",
        "gathered",
        "log",
        "pending",
        "shard",
        "full_bytes",
    ):
        assert hasattr(Unit, name) or name in Unit.__init__.__code__.co_names, name


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """The zerobook modules module `name` imports, at module level or inside a function."""
    found = set()
    for target in imported(MODULES[name]):
        while (
            target and target not in MODULES
        ):  # `from zerobook.x import y`: y may be a name in x
            target = target.rpartition(".")[0]
        found |= {target} - {name, "zerobook", ""}
    return found


def cycles() -> list[list[str]]:
    """The import cycles among zerobook's modules (strongly connected components, Tarjan)."""
    graph = {name: imports_of(name) for name in MODULES}
    index, low, stack, found = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_of_zerobook_imports_itself_back():
    """No import cycle, counting imports inside functions (which hide a cycle, not remove it)."""
    assert not cycles()


def test_the_classroom_calls_the_launcher_and_nothing_calls_the_classroom():
    """Arrows one way: classroom -> launcher (zerobook.grading, launch) -> rank side."""
    outside = [name for name in MODULES if name not in CLASSROOM]
    back = {
        name: imports_of(name) & CLASSROOM
        for name in outside
        if imports_of(name) & CLASSROOM
    }
    assert not back
    assert "zerobook.grading" in set().union(*(imports_of(n) for n in CLASSROOM))


def test_the_old_grading_command_still_runs_the_classrooms():
    out = subprocess.run(
        [sys.executable, "-m", "zerobook.grading", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert (
        "python -m zerobook.classroom" in out.stdout
        and "{release,grade,book,student-branch}" in out.stdout
    )


def test_every_module_stays_under_300_lines():
    long = {
        module_name(p): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 300
    }
    assert not long


def _top_imports(source: str) -> set[str]:
    import ast

    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _requirements_closure(names: list[str]) -> set[str]:
    """The distributions `names` bring, with everything they require (installed ones)."""
    import re
    from importlib import metadata

    seen, todo = set(), [re.split(r"[<>=!~\[; ]", n)[0].lower() for n in names]
    while todo:
        name = todo.pop().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [
            re.split(r"[<>=!~\[; (]", r)[0].lower()
            for r in requires
            if "extra ==" not in r
        ]
    return seen


def test_pip_install_brings_what_the_chapters_labs_and_package_import_at_run_time():
    """A Colab student runs `pip install` of the course, nothing else: pyproject's dependencies
    (and what they bring) cover every module a notebook or the package's student side imports,
    torch aside (a host keeps its own). The book's `glue` goes through zerobook.pages.glue."""
    import json
    from importlib import metadata

    sources = [
        "".join(c["source"])
        for nb in [*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("labs/*/*.ipynb")]
        for c in json.loads(nb.read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    sources = [
        "\n".join(
            line for line in s.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        for s in sources
    ]
    modules = [p for p in PACKAGE.rglob("*.py") if "classroom" not in p.parts]
    optional = [p.name for p in modules if "myst_nb" in _top_imports(p.read_text())]
    assert optional == [
        "glue.py"
    ]  # the book's MyST-NB: only zerobook.pages.glue, which can do without
    sources += [p.read_text() for p in modules if p.name != "glue.py"]
    imported = set().union(*map(_top_imports, sources))
    # torchao: only the GPU check's run of torchao itself, which make gpu-check runs where it is
    torchao = [p.name for p in modules if "torchao" in _top_imports(p.read_text())]
    assert torchao == ["fsdp2_torchao.py"]
    third_party = (
        imported
        - set(sys.stdlib_module_names)
        - {"zerobook", "torch", "__future__", "torchao"}
    )
    providers = metadata.packages_distributions()
    config = pyproject()
    brought = _requirements_closure(config["project"]["dependencies"])
    missing = {
        m: providers.get(m)
        for m in third_party
        if not {d.lower().replace("_", "-") for d in providers.get(m, [m])} & brought
    }
    assert missing == {}, f"imported at run time, not brought by pip install: {missing}"


def test_glue_shows_a_value_without_myst_nb_and_keeps_it_for_the_book_with_it(
    monkeypatch,
):
    """Colab has no MyST-NB: a chapter's glue() displays only what it is asked to."""
    from IPython import display as ipython_display

    from zerobook.pages.glue import glue

    shown = []
    monkeypatch.setattr(ipython_display, "display", lambda *a, **k: shown.append(a))
    monkeypatch.setattr("myst_nb.ext.glue.ipy_display", lambda *a, **k: shown.append(k))
    monkeypatch.setitem(
        sys.modules, "myst_nb", None
    )  # import myst_nb raises ImportError
    glue("hidden", 1, display=False)
    glue("shown", 2)
    assert shown == [(2,)]
    monkeypatch.delitem(sys.modules, "myst_nb")
    glue("for_the_book", 3, display=False)  # MyST-NB's own glue, which the book reads
    assert shown[1]["metadata"]["scrapbook"]["name"] == "for_the_book"


IRI_CHECKS = """
import sys, jsonschema, nbformat
nbformat.validate(nbformat.v4.new_notebook())
built = "rfc3987_syntax.syntax_helpers" in sys.modules
check = jsonschema.Draft7Validator.FORMAT_CHECKER
print(built, [check.conforms(v, f) for v in ("http://x.org/ü", "a b:", "../c") for f in ("iri", "iri-reference")])
"""


def test_jsonschemas_iri_grammar_is_built_only_when_a_check_asks_and_checks_the_same():
    """zerobook/_lazy_iri.py: a process that imported zerobook reads a notebook without building
    rfc3987_syntax's grammar (~2.5 CPU-s), and an IRI check still answers as the real one."""
    pytest.importorskip("rfc3987_syntax")

    def run(first: str) -> str:
        done = subprocess.run([sys.executable, "-c", first + IRI_CHECKS], cwd=ROOT,
                              capture_output=True, text=True, check=True)  # fmt: skip
        return done.stdout.split(" ", 1)

    built, answers = run("import zerobook\n")
    real_built, real_answers = run("")
    assert (built, real_built) == ("False", "True")
    assert answers == real_answers and "False" in answers and "True" in answers, answers
    # without its parser library (lark), jsonschema would have had no IRI checker: all pass
    no_lark = "import sys, zerobook\nsys.modules['lark'] = None\n"
    assert run(no_lark)[1].strip() == str([True] * 6)
