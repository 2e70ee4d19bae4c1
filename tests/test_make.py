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
