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
