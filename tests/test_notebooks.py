"""Notebooks as committed: outputs stripped, every chapter in the book, every lab gradable."""

import json
import re

import pytest
import yaml

from conftest import ROOT

NOTEBOOKS = sorted(
    p
    for folder in ("chapters", "labs", "book")
    for p in (ROOT / folder).rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts
)
LABS = sorted(p for p in (ROOT / "labs").glob("*/*.ipynb") if p.stem == p.parent.name)


def load(path):
    return json.loads(path.read_text())


def toc_files() -> set[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    found = {toc["root"]}
    for part in toc.get("parts", []):
        found |= {chapter["file"] for chapter in part.get("chapters", [])}
    return found


def test_there_are_notebooks_to_check():
    assert any(p.parts[-2] == "chapters" for p in NOTEBOOKS) and LABS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_without_outputs(path):
    dirty = [
        i
        for i, cell in enumerate(load(path)["cells"])
        if cell["cell_type"] == "code"
        and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, (
        f"{path.name}: cells {dirty} have outputs; strip them before committing"
    )


CHAPTERS = [p for p in NOTEBOOKS if p.parts[-2] == "chapters"]


@pytest.mark.parametrize(
    "path",
    [p for p in CHAPTERS if not p.stem.startswith("appendix_")],
    ids=lambda p: p.stem,
)
def test_every_chapter_has_a_captioned_figure_that_its_text_refers_to(path):
    cells = load(path)["cells"]
    figures = [
        c["metadata"]["mystnb"]["figure"]
        for c in cells
        if "figure" in c["metadata"].get("mystnb", {})
    ]
    prose = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert figures and all(f.get("caption") for f in figures), (
        f"{path.stem}: no captioned figure"
    )
    named = lambda f: (
        f"`{f['name']}`" in prose or f"<{f['name']}>`" in prose
    )  # {numref}`x` or {ref}`text <x>`
    unreferenced = [f["name"] for f in figures if not named(f)]
    assert not unreferenced, (
        f"{path.stem}: figures not referred to in the text: {unreferenced}"
    )


def test_every_chapter_is_in_the_table_of_contents():
    chapters = {
        str(p.relative_to(ROOT).with_suffix(""))
        for p in NOTEBOOKS
        if p.parts[-2] == "chapters"
    }
    assert chapters <= toc_files(), chapters - toc_files()
    for entry in toc_files() - {
        e for e in toc_files() if e.startswith("book/labs/")
    }:  # made at build time
        assert any((ROOT / entry).with_suffix(s).exists() for s in (".md", ".ipynb")), (
            entry
        )


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.parent.name)
def test_lab_is_an_nbgrader_notebook(path):
    cells = load(path)["cells"]
    meta = [c["metadata"].get("nbgrader") for c in cells]
    assert all(meta), "every cell of a lab carries nbgrader metadata"
    ids = [m["grade_id"] for m in meta]
    assert len(ids) == len(set(ids)), "grade ids are unique"
    tests = [m for m in meta if m["grade"]]
    assert tests and all(m["points"] > 0 for m in tests)
    for cell, m in zip(cells, meta):
        text = "".join(cell["source"])
        begins, ends = text.count("### BEGIN SOLUTION"), text.count("### END SOLUTION")
        if (
            cell["cell_type"] == "markdown" and m["solution"]
        ):  # a written answer, graded by hand
            assert m["grade"] and m["points"] > 0 and begins == ends == 0, m["grade_id"]
            continue
        assert begins == ends and (begins > 0) == m["solution"], m["grade_id"]
        assert ("HIDDEN TESTS" not in text) or m["grade"], m["grade_id"]
    assert any("HIDDEN TESTS" in "".join(c["source"]) for c in cells), (
        "the lab has hidden tests"
    )


def test_rank_scripts_are_written_from_a_cell():
    """A lab's student code reaches the ranks as a file the notebook writes (%%writefile)."""
    for path in LABS:
        writes = [
            c
            for c in load(path)["cells"]
            if re.match(r"%%writefile \w+_student\.py", "".join(c["source"]))
        ]
        assert writes, path.name


CHAPTERS = [p for p in NOTEBOOKS if p.parts[-2] == "chapters"]


def markdown(path) -> str:
    return "\n".join(
        "".join(c["source"])
        for c in load(path)["cells"]
        if c["cell_type"] == "markdown"
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_at_least_three_exercises_each_with_a_dropdown_answer(path):
    text = markdown(path)
    exercises = re.findall(r":::\{admonition\} Exercise \d+\n", text)
    answers = re.findall(r":::\{admonition\} Answer\n:class: dropdown\n", text)
    assert len(exercises) >= 3 and len(answers) == len(exercises), (
        len(exercises),
        len(answers),
    )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_cells_that_compute_the_answers_are_not_shown_before_the_exercises(path):
    """A cell that glues an exercise's answer (`glue("ex...`) is tagged remove-cell: the book
    shows the answer only in its folded dropdown, not as code above the exercise."""
    shown = [
        i
        for i, cell in enumerate(load(path)["cells"])
        if cell["cell_type"] == "code"
        and re.search(r'(glue|answer)\("(app_)?ex', "".join(cell["source"]))
        and "remove-cell" not in cell["metadata"].get("tags", [])
    ]
    assert not shown, (
        f"{path.name}: cells {shown} compute answers in plain view; tag them remove-cell"
    )


def _citation_links():
    """(page, link text, url) of every Markdown link in the chapters and book pages."""
    link = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")
    return [
        (name, *m.groups())
        for name, text in _markdown_pages()
        for m in link.finditer(text)
    ]


def test_every_reference_is_cited_where_it_is_used_and_reads_in_jupyterlab():
    """Citations are links to the source, named by author and year: jupyterlab-myst
    has no bibliography, so `{cite}` would show its bare key there."""
    from pybtex.database import parse_file

    entries = parse_file(ROOT / "book/references.bib").entries
    links = _citation_links()
    assert not [n for n, text in _markdown_pages() if "{cite" in text]
    urls = {url for _, _, url in links}
    assert all("url" in e.fields for e in entries.values())
    assert {k for k, e in entries.items() if e.fields["url"] not in urls} == set()
    for name, text, url in links:
        for e in entries.values():
            if e.fields["url"] != url or not re.search(r"\b(19|20)\d\d\b", text):
                continue
            first = " ".join(e.persons["author"][0].last_names)
            assert first in text and e.fields["year"] in text, (name, text, url)


def _markdown_pages():
    return [(p.name, markdown(p)) for p in CHAPTERS] + [
        (p.name, p.read_text()) for p in (ROOT / "book").glob("*.md")
    ]


def test_every_glossary_term_is_linked_from_a_chapter():
    glossary = (
        (ROOT / "book/glossary.md")
        .read_text()
        .split("```{glossary}")[1]
        .split("```")[0]
    )
    groups, group = [], []
    for (
        line
    ) in glossary.splitlines():  # a definition follows one or more lines of terms
        if line and not line.startswith(" "):
            group.append(line.strip())
        elif line.startswith(" ") and group:
            groups.append(group)
            group = []
    text = "\n".join(markdown(p) for p in CHAPTERS)
    linked = {
        m.group(2) or m.group(1)
        for m in re.finditer(r"\{term\}`([^<`]+?)(?: <([^>]+)>)?`", text)
    }
    unlinked = [g for g in groups if not set(g) & {t.strip() for t in linked}]
    assert groups and not unlinked, unlinked


def test_the_readme_pictures_exist():
    pictures = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", (ROOT / "README.md").read_text())
    assert len(pictures) >= 2 and all((ROOT / p).is_file() for p in pictures), pictures


def test_how_to_use_names_every_lab_its_folder_and_its_graded_parts():
    """The guide's table of labs stays true: every lab folder, and each part its harness grades
    (PARTS read from the harness's source: importing it would load torch and FSDP)."""
    import ast

    guide = (ROOT / "book" / "how_to_use.md").read_text()
    for path in LABS:
        row = next(
            (line for line in guide.splitlines() if f"`labs/{path.stem}/`" in line),
            None,
        )
        assert row is not None, f"book/how_to_use.md has no row for labs/{path.stem}/"
        harness = ast.parse(
            (ROOT / "zerobook" / "labs" / f"{path.stem}.py").read_text()
        )
        parts = next(
            ast.literal_eval(node.value)
            for node in harness.body
            if isinstance(node, ast.Assign)
            and any(getattr(t, "id", None) == "PARTS" for t in node.targets)
        )
        assert row.rstrip(" |").endswith(", ".join(f"`{p}`" for p in parts)), (
            path.stem,
            parts,
        )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_check_cells_are_folded_behind_checked_by_code_and_teaching_cells_are_not(path):
    """The book's reader sees the teaching code; a cell that is mostly asserts and glue is folded
    behind "Checked by code" (its output in view). `python tests/check_cells.py` tags them."""
    from check_cells import is_check_cell, is_folded

    cells = [c for c in load(path)["cells"] if c["cell_type"] == "code"]
    wrong = [i for i, c in enumerate(cells) if is_check_cell(c) != is_folded(c)]
    assert not wrong, (
        f"{path.name}: code cells {wrong} are folded wrongly; run tests/check_cells.py"
    )


def test_the_readmes_grading_times_are_the_saved_measurement():
    """README's seconds per lab, the total and the whole call are those of
    benchmarks/results/grading_cpu.md (benchmarks/grading.py's saved run)."""
    saved = (ROOT / "benchmarks" / "results" / "grading_cpu.md").read_text()
    readme = " ".join((ROOT / "README.md").read_text().split())
    for lab, seconds in re.findall(r"^\| s0 / (\w+) \| (\d+) \|", saved, re.M):
        assert f"{lab} {seconds} s" in readme, (lab, seconds)
    own, whole = re.search(
        r"own seconds: (\d+) s; the whole `grade` call: (\d+) s", saved
    ).groups()
    labs = re.search(r"x (\d+) labs", saved).group(1)
    count = {"7": "seven", "8": "eight", "9": "nine", "10": "ten"}[labs]
    assert f"{own} s of grading for the {count} labs, {whole} s for the" in readme
    per_hundred = re.search(r"a class of 100 at this rate: ([\d.]+) h", saved).group(1)
    assert f"100 × {whole} s" in readme and f"about {per_hundred} hours" in readme
    ratios = [
        float(r)
        for r in re.findall(r"^\| s0 / \w+ \| \d+ \| \d+ \| ([\d.]+) \|$", saved, re.M)
    ]
    assert f"takes {min(ratios):.2f} to {max(ratios):.2f} times its" in readme
    first = re.search(r"as well: (\d+) s", saved).group(1)
    assert f"times each reference: {first} s that time" in readme
    assert (
        f"which would be {round(100 * int(whole) / 8 / 60)} minutes" in readme
    )  # --jobs 8


def shown_and_check_lines(source: str) -> tuple[int, int]:
    """A shown cell's non-blank lines, and those that check or style: an assert, a glue
    call, an import of pytest, glue or myst_nb, a line that sets rcParams (however
    wrapped: every line of the statement counts)."""
    import ast

    lines = source.splitlines()
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics
        return sum(bool(line.strip()) for line in lines), 0
    checks = {n for n, line in enumerate(lines, 1) if "rcParams" in line}
    for node in ast.walk(tree):
        call = getattr(node, "func", None)
        name = getattr(call, "attr", None) or getattr(call, "id", "")
        imported = [a.name for a in getattr(node, "names", [])]
        imported += [getattr(node, "module", None) or ""]
        tools = any(m.split(".")[0] in {"pytest", "myst_nb", "glue"} for m in imported)
        if (
            isinstance(node, ast.Assert)
            or (isinstance(node, ast.Call) and name == "glue")
            or (isinstance(node, (ast.Import, ast.ImportFrom)) and tools)
        ):
            checks |= set(range(node.lineno, node.end_lineno + 1))
    shown = {n for n, line in enumerate(lines, 1) if line.strip()}
    return len(shown), len(checks & shown)


def test_checks_are_at_most_3_percent_of_the_lines_a_reader_sees():
    """Across the chapters, the code lines shown unfolded in the book: at most 3% check or
    style (the checks live in cells folded behind "Checked by code")."""
    from check_cells import HIDDEN

    shown = checks = 0
    for path in CHAPTERS:
        for cell in load(path)["cells"]:
            tags = set(cell["metadata"].get("tags", []))
            if cell["cell_type"] == "code" and not tags & set(HIDDEN):
                lines, found = shown_and_check_lines("".join(cell["source"]))
                shown, checks = shown + lines, checks + found
    assert checks <= 0.03 * shown, f"{checks} of {shown} shown lines are checks"
