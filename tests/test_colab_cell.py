"""The Colab first cell: one text (zerobook/assets/colab_first_cell.py), shown by "How to use
this course" and put first in each lab's student version, pointing at the published repository.
That it works on a fresh Colab-like environment is make test-colab's (tests/colab_like.py)."""

import subprocess
import sys

import nbformat

from conftest import ROOT
from zerobook.classroom import colab_cell


def test_how_to_use_shows_the_very_cell_the_labs_start_with():
    page = (ROOT / "book" / "how_to_use.md").read_text()
    assert "```{literalinclude} /zerobook/assets/colab_first_cell.py" in page


def test_the_cell_points_at_the_published_repository_once_there_is_one(tmp_path):
    config = tmp_path / "_config.yml"
    shipped = (ROOT / "_config.yml").read_text()
    config.write_text(shipped)
    assert colab_cell.published_repository(config) == ""  # as shipped: not published
    assert 'REPOSITORY = ""' in colab_cell.cell_source("")  # no placeholder address
    config.write_text(shipped.replace('url: ""', 'url: "https://github.com/a/b"'))
    url = colab_cell.published_repository(config)
    assert url == "https://github.com/a/b"
    assert 'REPOSITORY = "https://github.com/a/b"' in colab_cell.cell_source(url)


def test_the_cell_goes_first_once_and_does_nothing_where_the_course_is_installed(
    tmp_path,
):
    title = nbformat.v4.new_markdown_cell("(lab)=\n# Lab 9: a title")
    notebook = nbformat.v4.new_notebook(
        cells=[title, nbformat.v4.new_code_cell("x = 1")]
    )
    for _ in range(2):
        colab_cell.put_first(notebook, "https://example.invalid/none")
    assert [c.source for c in notebook.cells[::2]] == [title.source, "x = 1"]
    assert notebook.cells[1].id == colab_cell.CELL_ID
    nbformat.validate(notebook)
    done = subprocess.run(  # zerobook is importable here: no clone, no pip
        [sys.executable, "-c", notebook.cells[1].source + "\nprint('skipped')"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout == "skipped\n" and not list(tmp_path.iterdir()), done.stderr


def test_the_review_reads_the_cell_only_if_the_student_changed_it():
    """The Colab cell starts another process and looks up a module: an honest release would be
    flagged for both. The course's own cell (whatever repository) is not reviewed; changed, it is."""
    from zerobook.classroom.review import review

    def flags(source):
        cell = nbformat.v4.new_code_cell(source)
        return review(nbformat.v4.new_notebook(cells=[cell]), "setup_check")

    assert flags(colab_cell.cell_source("https://github.com/a/b")) == []
    changed = colab_cell.cell_source() + "\nprint('and one line more')"
    assert any("subprocess" in flag for flag in flags(changed)), flags(changed)


def test_how_to_use_names_the_torch_the_colab_like_run_installs():
    from colab_like import OTHER_TORCH

    page = (ROOT / "book" / "how_to_use.md").read_text()
    assert f"torch {OTHER_TORCH}," in page


def test_unpublished_the_cell_stops_with_a_sentence_where_it_would_install(tmp_path):
    """Without the course installed and with no repository named, the cell says what to set
    instead of cloning a placeholder address."""
    import subprocess
    import sys

    script = tmp_path / "cell.py"
    script.write_text(colab_cell.cell_source(""))
    done = subprocess.run(
        [sys.executable, "-S", "-I", str(script)], capture_output=True, text=True
    )  # -S -I: a Python that cannot see the course
    assert done.returncode == 1 and "set REPOSITORY" in done.stderr, done
    assert not (tmp_path / "zero-from-scratch").exists()


def test_a_release_from_another_folder_names_the_course_s_repository(
    tmp_path, monkeypatch
):
    """The address is read from the clone's _config.yml when the classroom runs elsewhere."""
    monkeypatch.chdir(tmp_path)
    assert colab_cell.course_config() == ROOT / "_config.yml"
    (tmp_path / "_config.yml").write_text('repository:\n  url: "https://x.org/c"\n')
    assert colab_cell.published_repository() == "https://x.org/c"
