"""Every chapter page teaches the way the ring chapter does (tests/page_measures.py has the limits):
at most 3,000 words of prose (and 8,000 on the built page: tests/test_book_links.py), a figure for each started 1,500 words,
no code cell shown unfolded over 30 lines, at most 5 sentences over 40 words, bold for terms
only, and the course's source shown as highlighted excerpts, never printed."""

import pytest

from conftest import ROOT
from page_measures import measure, problems

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_page_is_within_the_limits_of_a_page_that_teaches(path):
    found = problems(path)
    assert not found, (
        f"{path.stem}: {found} (.venv/bin/python tests/page_measures.py {path.relative_to(ROOT)})"
    )


def test_the_measures_see_what_they_limit(tmp_path):
    """A page over every limit is found over each (the measures can fail)."""
    import json

    long = "Word " + " ".join(["word"] * 44) + "."
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": f"{long} {long}\n\n" * 4},
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": "**this is a whole sentence in bold here.**",
        },
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": "x = 1\n" * 31},
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "source": "print(inspect.getsource(f))",
        },
    ]
    page = tmp_path / "over.ipynb"
    page.write_text(json.dumps({"cells": cells}))
    assert len(measure(page)["long sentences"]) == 8
    found = " | ".join(problems(page))
    for what in (
        "figures for",
        "a shown cell of 31",
        "8 sentences",
        "a bold sentence",
        "print source",
    ):
        assert what in found, (what, found)
