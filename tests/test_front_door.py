"""The book's front door: the intro's map of the course is drawn from the table of contents and the
labs' table; "How to use" is short (what you need, three ways through, time, starting, the labs)
and the instructor's material has a page of its own; reading times and lab sizes are measured."""

import json
import re

import yaml

from conftest import ROOT
from zerobook.figures import course_map
from zerobook.pages import reading

HOW_TO_USE = ROOT / "book" / "how_to_use.md"


def words_of(markdown: str) -> int:
    """Every word a reader sees on a Markdown page: code blocks and front matter left out,
    tables and directives' text kept."""
    text = re.sub(r"^---\n.*?\n---\n", "", markdown, flags=re.S)
    text = re.sub(
        r"```(?:\{code-cell\}|bash|python|yaml|\{literalinclude\}).*?```",
        " ",
        text,
        flags=re.S,
    )
    return len(reading.WORD.findall(text))


def test_how_to_use_is_at_most_1200_words_and_sends_the_instructor_elsewhere():
    page = HOW_TO_USE.read_text()
    assert words_of(page) <= 1_200, words_of(page)
    for path in ("A reader", "A student", "An instructor", "{doc}`instructors`"):
        assert path in page
    for moved in ("hidden_params.json", "BEGIN HIDDEN TESTS", "make grade"):
        assert (
            moved not in page
            and moved in (ROOT / "book" / "instructors.md").read_text()
        )


def test_the_map_holds_every_numbered_page_and_every_lab_in_order():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbered = [
        c["file"] for p in toc["parts"] if p.get("numbered") for c in p["chapters"]
    ]
    shown = course_map.chapters(ROOT)
    assert [c.page for c in shown] == numbered
    assert [c.number for c in shown] == list(range(1, len(numbered) + 1))
    folders = sorted(
        p.name for p in (ROOT / "labs").iterdir() if (p / f"{p.name}.ipynb").exists()
    )
    labs = course_map.labs(ROOT)
    assert sorted(lab.folder for lab in labs) == folders
    assert all(set(lab.chapters) <= set(numbered) and lab.chapters for lab in labs)


def test_lab_labels_never_overlap_and_stay_beside_the_chapters():
    row = {c.page: i for i, c in enumerate(course_map.chapters(ROOT))}
    placed = course_map.lab_rows(course_map.labs(ROOT), row, len(row))
    ys = [y for _, y in placed]
    assert all(b - a >= 1.0 - 1e-9 for a, b in zip(ys, ys[1:]))
    assert 0 <= ys[0] and ys[-1] <= len(row) - 1


def test_the_intro_opens_with_the_map():
    intro = (ROOT / "book" / "intro.md").read_text()
    assert ":name: fig-course-map" in intro and "_generated/course_map.svg" in intro


def test_reading_time_counts_prose_only_and_a_lab_s_size_its_solution(tmp_path):
    notebook = tmp_path / "n.ipynb"
    md = "word " * 240 + "\n```python\n" + "code " * 500 + "\n```\n| a | table |\n"
    code = "x = 1\n### BEGIN SOLUTION\n# why\ny = 2\n\nz = 3\n### END SOLUTION\n"
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": md},
        {"cell_type": "code", "metadata": {}, "source": code, "outputs": []},
    ]
    notebook.write_text(json.dumps({"cells": cells}))
    assert reading.prose_words(notebook) == 240
    assert (
        reading.reading_minutes(notebook) == 5
    )  # 2 minutes at 120 a minute: at least 5
    assert reading.solution_lines(notebook) == 2


def test_the_readers_path_is_named_by_the_book_s_numbers():
    named, minutes = reading.reader_path(ROOT)
    numbers = {c.page.split("/")[-1]: c.number for c in course_map.chapters(ROOT)}
    listed = set()
    for run in named.removeprefix("chapters ").split(", "):
        first, _, last = run.partition("–")
        listed |= set(range(int(first), int(last or first) + 1))
    assert listed == {numbers[page] for page in reading.READER_PATH}
    assert minutes == sum(
        reading.reading_minutes(ROOT / "chapters" / f"{p}.ipynb")
        for p in reading.READER_PATH
    )
