"""What `make test`'s phases collect: the book tests phase reads only tests/test_book*.py (collecting
every test module in each of its processes cost ~5 s of CPU apiece), so every test that needs the
built book must live there."""

import re

from conftest import ROOT

BOOK_FILES = "tests/test_book*.py"


def test_the_book_tests_phase_collects_every_book_test():
    makefile = (ROOT / "Makefile").read_text()
    assert f"$(PY) -m pytest {BOOK_FILES} -m book" in makefile
    marked = {
        path.name
        for path in (ROOT / "tests").glob("*.py")
        if re.search(r"pytest\.mark\.book\b", path.read_text())
    }
    assert marked, "no test is marked book"
    collected = {path.name for path in ROOT.glob(BOOK_FILES)}
    assert marked <= collected, (
        f"marked book outside {BOOK_FILES}: {marked - collected}"
    )


def test_the_readme_places_every_test_file_in_one_room():
    """README's "The tests, by room": each tests/test_*.py named once, none that is not there."""
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## The tests, by room", 1)[1].split("\n## ", 1)[0]
    listed = [
        name.strip()
        for row in table.splitlines()
        if row.startswith("| ") and not row.startswith(("| room", "| ---"))
        for name in row.split(" | ")[1].rstrip(" |").split(",")
    ]
    files = sorted(
        p.stem.removeprefix("test_") for p in (ROOT / "tests").glob("test_*.py")
    )
    assert sorted(listed) == files, (
        set(listed) ^ set(files),
        [n for n in set(listed) if listed.count(n) > 1],
    )


def test_every_notebook_a_reader_or_student_opens_runs_under_nbval():
    """make test's first phase runs chapters/, labs/ and the solved labs (tests/solved_labs.py)
    under nbval; each notebook it leaves out (LONG_LABS) runs under nbval in make test-grading,
    by a slow test that names it."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(
        r"\$\(PYTEST\) tests chapters labs \$\(SOLVED\) \$\(LONG_LABS\)", makefile
    )
    assert (
        "tests/solved_labs.py $(SOLVED)" in makefile
        and "-p tests.solved_labs" in makefile
    )
    left_out = re.search(r"^LONG_LABS := (.*)$", makefile, re.M).group(1).split()
    solved = re.search(r"^SOLVED := (.*)$", makefile, re.M).group(1)
    lab = lambda path: re.search(r"labs/(\w+)", path.replace("$(SOLVED)", solved))[1]  # noqa: E731
    slow = [
        p.read_text()
        for p in (ROOT / "tests").glob("test_*.py")
        if "pytest.mark.slow" in p.read_text() and "--nbval-lax" in p.read_text()
    ]
    for ignored in left_out:
        name = lab(ignored.removeprefix("--ignore="))
        assert any(
            f'"labs" / "{name}" / "{name}.ipynb"' in t
            and f'solved_version(ROOT / "labs", "{name}")' in t
            for t in slow
        ), f"{ignored}: no test of make test-grading runs it under nbval"


def test_the_readme_counts_the_careless_classes_as_they_are():
    """README's number of careless mistakes is tests/careless/'s, and every lab has five."""
    from importlib import import_module

    classes = {
        p.stem: import_module(f"careless.{p.stem}").CLASS
        for p in (ROOT / "tests" / "careless").glob("*.py")
        if p.stem not in ("__init__", "common")
    }
    labs = {p.parent.name for p in (ROOT / "labs").glob("*/*.ipynb")}
    assert set(classes) == labs, set(classes) ^ labs
    assert all(len(c) >= 5 for c in classes.values()), classes.keys()
    total = sum(map(len, classes.values()))
    assert f"grades {total} careless mistakes" in (ROOT / "README.md").read_text()
