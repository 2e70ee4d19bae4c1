"""What the course's text names inside the package exists: every path under zerobook/ and every
dotted zerobook name in a notebook, the README, the book's pages, a docstring or a comment, and
every module a notebook's `harness_source` reads, by its name of today.

A module that moved into a room keeps its old name (zerobook/_moved.py) for a reader's old code;
the course's own text uses the new one. The capstone's notebook read "capstone_train.py" from
the package's top folder after the module had moved to train/: the cell raised for every
student, and no test saw it.
"""

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest

from conftest import ROOT
from zerobook import _moved, grading

PACKAGE = ROOT / "zerobook"
# a path under zerobook/ (a file, a folder, or a glob), and a dotted name zerobook.a.b
PATH = re.compile(r"zerobook/([\w/.*-]*[\w/])")
DOTTED = re.compile(r"(?<![\w/.])zerobook((?:\.\w+)+)")
FILES = {"css", "js", "html", "py", "md", "json", "ipynb"}  # book/_static/zerobook.css


def notebooks() -> list[Path]:
    return sorted([*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("labs/*/*.ipynb")])


def cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]


def texts():
    """(path, text) of everything a reader, a student or a contributor reads: the notebooks,
    the README, the book's pages, the Makefile and CI, and every file of the package, the tests
    and the benchmarks (not the recorded results: a failure's log quotes the paths of its day)."""
    for path in notebooks():
        yield path, "\n".join(cells(path))
    plain = [ROOT / "README.md", ROOT / "Makefile", ROOT / ".ci" / "run"]
    plain += [*ROOT.glob("book/*.md"), *ROOT.glob(".github/workflows/*.yml")]
    plain += [ROOT / "_config.yml", ROOT / "_toc.yml"]
    for folder in ("zerobook", "tests", "benchmarks"):
        plain += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.suffix in (".py", ".md", ".js", ".html")
            and "results" not in p.relative_to(ROOT).parts
        ]
    for path in sorted(plain):
        if path != Path(__file__):  # its examples of what it finds
            yield path, path.read_text()


def placeholder(word: str) -> bool:
    """NAME, LAB: a stand-in for any lab's or module's name."""
    return word.isupper()


def missing_paths(text: str) -> list[str]:
    """The paths under zerobook/ that `text` names and that do not exist (a store key such as
    zerobook/step/{step} and a placeholder such as zerobook/labs/LAB.py are not paths)."""
    found = []
    for match in PATH.finditer(text):
        path, after = match.group(1), text[match.end() : match.end() + 1]
        stem = Path(path).name.split(".")[0]
        if after == "{" or placeholder(stem):
            continue
        if not (PACKAGE / path).exists() and not list(PACKAGE.glob(path)):
            found.append(f"zerobook/{path}")
    return found


@cache
def top_level(relative: str) -> frozenset:
    """The names a module of the package defines or imports at its top level (read, not
    imported: no torch), with those its split siblings took (zerobook/_moved.py, SPLIT)."""
    tree = ast.parse((PACKAGE / relative).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    module = _moved.current_name(relative).removeprefix("zerobook.")
    for sibling in _moved.SPLIT.get(module, ()):
        names |= top_level(_moved.package_path(sibling))
    return frozenset(names)


def is_module(dotted: str) -> bool:
    """A module or package of the package today, by its new name or an old one."""
    path = _moved.package_path(dotted)
    return (PACKAGE / path).is_file()


def unknown_name(dotted: str) -> str | None:
    """`dotted` ("zerobook.train.parity.norm_bound") if no module of the package, or no
    top-level name of one, answers to it; None where one does."""
    parts = dotted.split(".")[1:]
    if any(placeholder(p) or p.startswith("__") for p in parts) or parts[-1] in FILES:
        return None
    for cut in range(len(parts), 0, -1):
        module = "zerobook." + ".".join(parts[:cut])
        if is_module(module):
            rest = parts[cut:]
            if not rest or rest[0].startswith("__"):
                return None
            known = top_level(_moved.package_path(module))
            return None if rest[0] in known else dotted
    return None if parts[0] in lazy_attributes() else dotted


@cache
def lazy_attributes() -> frozenset:
    """`zb.torchrun`, `zb.setup`, ...: the names zerobook/__init__.py loads on first use."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    table = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and node.targets[0].id == "ATTRIBUTES"
    )
    return frozenset(ast.literal_eval(table))


def test_no_text_names_a_path_inside_the_package_that_does_not_exist():
    wrong = {
        str(path.relative_to(ROOT)): missing
        for path, text in texts()
        if (missing := missing_paths(text))
    }
    assert not wrong, wrong


def test_every_dotted_name_of_the_package_that_the_text_uses_exists():
    """The tests are left out: they name modules that are not there on purpose."""
    wrong = {
        str(path.relative_to(ROOT)): sorted(set(unknown))
        for path, text in texts()
        if path.parts[len(ROOT.parts)] != "tests"
        and (
            unknown := [
                name
                for m in DOTTED.finditer(text)
                if (name := unknown_name("zerobook" + m.group(1)))
            ]
        )
    }
    assert not wrong, wrong


def harness_source_calls(path: Path) -> list[ast.Call]:
    """Every call of harness_source in the code cells of notebook `path` (magics left out)."""
    calls = []
    for source in cells(path):
        code = "\n".join(line for line in source.splitlines() if line[:1] not in "%!")
        try:
            calls += calls_in(code)
        except SyntaxError:  # a Markdown cell
            pass
    return calls


def calls_in(code: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", "")) == "harness_source"
    ]


@pytest.mark.parametrize("notebook", notebooks(), ids=lambda p: p.stem)
def test_every_harness_source_a_notebook_shows_reads_a_module_by_its_name_of_today(
    notebook,
):
    """Each call is made here as the notebook makes it (the harness is read as text); a module
    named by an old name or path still reads (harness_source resolves it) but fails here."""
    for call in harness_source_calls(notebook):
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        module = kwargs.get("module", f"zerobook.labs.{args[0]}")
        assert module == _moved.current_name(module), (
            f"{notebook.name}: harness_source reads {module!r}: name the module as it is "
            f"today, {_moved.current_name(module)!r}"
        )
        assert grading.harness_source(*args, **kwargs)


def test_harness_source_reads_a_module_by_any_of_its_names():
    """By its name, its old name, or its file's path under zerobook/, old or new."""
    names = [
        "zerobook.train.capstone_train",
        "capstone_train",
        "capstone_train.py",
        "train/capstone_train.py",
        "zerobook/capstone_train.py",
    ]
    read = {
        grading.harness_source("capstone", "clip_in_piece_order", module=n)
        for n in names
    }
    assert len(read) == 1 and next(iter(read)).startswith("def clip_in_piece_order(")
    with pytest.raises(FileNotFoundError):
        grading.harness_source(
            "capstone", "run", module="zerobook.train.no_such_module"
        )


def test_the_checks_fail_on_what_they_look_for():
    """The capstone's stale path of stop 61, and names that are not there, are found."""
    assert missing_paths("see zerobook/capstone_train.py and zerobook/labs/LAB.py") == [
        "zerobook/capstone_train.py"
    ]
    assert missing_paths("store.set(f'zerobook/step/{step}')") == []
    assert unknown_name("zerobook.train.parity.norm_bound") is None
    assert unknown_name("zerobook.memory.model_state_bytes") is None  # an old name
    assert unknown_name("zerobook.plots.PALETTE") is None  # a split module's sibling
    assert unknown_name("zerobook.torchrun") is None
    assert unknown_name("zerobook.train.parity.no_such_name")
    assert unknown_name("zerobook.no_such_module")
    stale = (
        'print(zb.grading.harness_source("capstone", "x", module="capstone_train.py"))'
    )
    [call] = calls_in(stale)
    assert call.keywords[0].value.value != _moved.current_name("capstone_train.py")
