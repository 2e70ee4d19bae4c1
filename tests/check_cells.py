"""Which chapter cells are checks: a reader of the book should see the teaching code, and find the
code that checks it (asserts, glue) one click away, behind a "Checked by code" toggle.

    .venv/bin/python tests/check_cells.py          # tag every chapter's check cells (and untag the rest)
    .venv/bin/python tests/check_cells.py chapters/zeropp.ipynb   # one chapter only
    .venv/bin/python tests/check_cells.py --split  # first move each teaching cell's checks to a cell after it

A cell is a check when at least half of its code lines are statements that check or glue: `assert`,
`glue(...)`, an import of glue or pytest, or a loop or `if` of only those (and assignments they read). Such a cell is tagged `hide-input` with its toggle
named CHECKED (myst-nb's cell-level `code_prompt_show`) and collapsed in JupyterLab
(`jupyter.source_hidden`): its output stays in view. A test keeps every
chapter so (tests/test_notebooks.py).
"""

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = {
    "code_prompt_show": "Checked by code: show the {type}",
    "code_prompt_hide": "Hide the {type}",
}
HIDDEN = ("remove-cell", "remove-input", "hide-cell", "hide-input")


def is_check(statement: ast.stmt) -> bool:
    """An assert, a call of glue, or a loop of nothing else."""
    if isinstance(statement, ast.Assert):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        func = statement.value.func
        return (
            func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        ) == "glue"
    if isinstance(statement, ast.For):
        return is_check_block(statement.body) and not statement.orelse
    if isinstance(statement, ast.If):  # glue one value or another
        return is_check_block(statement.body + statement.orelse)
    return False


def is_check_block(statements: list[ast.stmt]) -> bool:
    """Checks, and the assignments that only they read (at least one check)."""
    assigns = (ast.Assign, ast.AugAssign, ast.AnnAssign)
    kinds = [is_check(s) for s in statements]
    return any(kinds) and all(
        k or isinstance(s, assigns) for s, k in zip(statements, kinds)
    )


def check_share(source: str) -> float:
    """The share of the cell's statement lines (blank lines and comments out) that are checks."""
    try:
        body = ast.parse(source).body
    except SyntaxError:  # IPython magics: not a check cell
        return 0.0
    lines = {
        n: is_check_statement(s)
        for s in body
        for n in range(s.lineno, s.end_lineno + 1)
    }
    code = [
        n
        for n, line in enumerate(source.splitlines(), 1)
        if n in lines and line.strip() and not line.strip().startswith("#")
    ]
    return sum(lines[n] for n in code) / len(code) if code else 0.0


CHECK_MODULES = {"glue", "myst_nb", "pytest"}  # imported only by checks
CHECK_IMPORTS = {
    "zerobook.pages.glue"
}  # the book's glue, through the package (zerobook.pages.glue)


def is_check_statement(statement: ast.stmt) -> bool:
    """A check, or an import of what only checks use (glue, pytest)."""
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        if getattr(statement, "module", None) in CHECK_IMPORTS:
            return True
        names = {a.name.split(".")[0] for a in statement.names}
        names |= {(getattr(statement, "module", None) or "").split(".")[0]} - {""}
        return names <= CHECK_MODULES | {"approx"}
    return is_check(statement)


def split_source(source: str) -> tuple[str, str]:
    """(teaching, checks): a cell's top-level checks moved after the rest, each with the
    comment lines just above it; ("", "") when the cell is not both."""
    try:
        body = ast.parse(source).body
    except SyntaxError:  # IPython magics
        return "", ""
    kinds = [is_check_statement(s) for s in body]
    # a name the teaching code reads later stays
    for index, statement in enumerate(body):
        later = [
            s for s, check in zip(body[index + 1 :], kinds[index + 1 :]) if not check
        ]
        if kinds[index] and bound(statement) & read(later):
            kinds[index] = False
    if not body or all(kinds) or not any(kinds):
        return "", ""
    lines, owner, start = source.splitlines(), {}, 0
    for index, statement in enumerate(body):
        for n in range(
            start, statement.end_lineno
        ):  # comments and blanks go with what follows
            owner[n] = index
        start = statement.end_lineno
    teaching = [
        line for n, line in enumerate(lines) if not kinds[owner.get(n, 0)] or n >= start
    ]
    checks = [
        line for n, line in enumerate(lines) if kinds[owner.get(n, 0)] and n < start
    ]
    return "\n".join(teaching).strip("\n"), "\n".join(checks).strip("\n")


def bound(statement: ast.stmt) -> set[str]:
    """The names a statement assigns."""
    return {
        n.id
        for n in ast.walk(statement)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def read(statements: list[ast.stmt]) -> set[str]:
    """The names some statement of `statements` reads."""
    return {
        n.id
        for s in statements
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def split(path: Path) -> int:
    """Move each shown cell's checks to a new cell right after it (folded by `fold`); how
    many cells were split."""
    import uuid

    text = path.read_text()
    notebook, cells, count = json.loads(text), [], 0
    for cell in notebook["cells"]:
        cells.append(cell)
        hidden = set(cell["metadata"].get("tags", [])) & set(HIDDEN)
        if cell["cell_type"] != "code" or hidden:
            continue
        teaching, checks = split_source("".join(cell["source"]))
        if not checks:
            continue
        cell["source"] = teaching.splitlines(keepends=True)
        cells.append(
            {
                "cell_type": "code",
                "execution_count": None,
                "id": uuid.uuid4().hex[:8],
                "metadata": {},
                "outputs": [],
                "source": checks.splitlines(keepends=True),
            }
        )
        count += 1
    if count:
        notebook["cells"] = cells
        path.write_text(dump(notebook, text))
    return count


def is_check_cell(cell: dict) -> bool:
    """A code cell the book should fold: mostly checks, not removed or hidden for another reason."""
    tags = set(cell["metadata"].get("tags", [])) - {"hide-input"}
    return (
        cell["cell_type"] == "code"
        and not tags & set(HIDDEN)
        and check_share("".join(cell["source"])) >= 0.5
    )


def is_marked(cell: dict) -> bool:
    """Folded in the book: tagged `hide-input` with the CHECKED toggle."""
    prompts = {
        k: v for k, v in cell["metadata"].get("mystnb", {}).items() if k in CHECKED
    }
    return "hide-input" in cell["metadata"].get("tags", []) and prompts == CHECKED


def is_folded(cell: dict) -> bool:
    """Folded in the book and collapsed in JupyterLab."""
    hidden = cell["metadata"].get("jupyter", {}).get("source_hidden") is True
    return is_marked(cell) and hidden


def dump(notebook: dict, like: str) -> str:
    """The notebook as JSON, written as the file `like` was (escaped or raw unicode), so that a
    diff shows only what changed."""
    escaped = json.dumps(json.loads(like), indent=1) + "\n" == like
    return json.dumps(notebook, indent=1, ensure_ascii=escaped) + "\n"


def fold(path: Path) -> int:
    """Tag the check cells of one notebook (untag cells folded as checks that no longer are);
    how many changed."""
    text = path.read_text()
    notebook, changed = json.loads(text), 0
    for cell in notebook["cells"]:
        want, meta = is_check_cell(cell), cell["metadata"]
        if want == is_folded(cell) and (want or not is_marked(cell)):
            continue
        tags = [t for t in meta.get("tags", []) if t != "hide-input"]
        meta["tags"], changed = tags + ["hide-input"] if want else tags, changed + 1
        others = {
            k: v for k, v in meta.get("mystnb", {}).items() if k not in CHECKED
        }  # a figure's caption stays
        meta["mystnb"] = {**others, **CHECKED} if want else others
        meta["jupyter"] = {  # collapsed in JupyterLab too: "..." until clicked
            **{
                k: v for k, v in meta.get("jupyter", {}).items() if k != "source_hidden"
            },
            **({"source_hidden": True} if want else {}),
        }
        for key in ("tags", "mystnb", "jupyter"):
            if not meta[key]:
                del meta[key]
        cell["metadata"] = json.loads(
            json.dumps(meta, sort_keys=True)
        )  # as Jupyter saves
    if changed:
        path.write_text(dump(notebook, text))
    return changed


if __name__ == "__main__":
    named = [Path(a) for a in sys.argv[1:] if not a.startswith("--")]
    for path in named or sorted((ROOT / "chapters").glob("*.ipynb")):
        split_count = split(path) if "--split" in sys.argv else 0
        print(path.name, split_count, fold(path), file=sys.stderr)
