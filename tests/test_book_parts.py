"""The book's parts beside the chapters: the labs (student versions), the PDF, the search page's
glossary hits, and the buttons and publishing workflow that wait for a repository URL.

The lab pages show each lab's student version (zerobook.classroom.release.student_version, written to
book/labs/ by `make book` and make test's book phase); the tests marked `book` read the built pages.
"""

import functools
import html
import importlib.util
import json
import os
import re

import pytest
import yaml

from conftest import ROOT
from test_book import HTML, browser, load, needs_book, page_html  # noqa: F401 - browser: a fixture
from zerobook.classroom import release as grading

LABS = ROOT / "labs"
GUIDE = ROOT / "book" / "how_to_use.md"


def chapters_of_each_lab() -> dict[str, list[str]]:
    """book/how_to_use.md's table: lab -> the chapters it practises (column "after the chapters")."""
    table = {}
    for row in GUIDE.read_text().splitlines():
        folder = re.search(r"`labs/(\w+)/`", row)
        if folder and row.startswith("|"):
            table[folder.group(1)] = re.findall(
                r"\{doc\}`\.\./(chapters/\w+)`", row.split("|")[3]
            )
    return table


@functools.cache
def student_version(lab: str):
    """grading.student_version of `lab`, made once for all the tests that read it."""
    return grading.student_version(LABS, lab)


def secret_lines(lab: str) -> set[str]:
    """Lines of the lab's reference solutions and hidden tests that its student version lacks."""
    student = "\n".join(cell.source for cell in student_version(lab).cells)
    secret = set()
    for cell in json.loads((LABS / lab / f"{lab}.ipynb").read_text())["cells"]:
        source = "".join(cell["source"])
        regions = [
            r[1]
            for r in re.findall(
                r"### BEGIN (SOLUTION|HIDDEN TESTS)\n(.*?)### END \1", source, re.S
            )
        ]
        if (
            not regions
            and cell["cell_type"] == "markdown"
            and cell["metadata"].get("nbgrader", {}).get("solution")
        ):
            regions = [source]  # a written answer: the whole cell is the model answer
        secret |= {line.strip() for region in regions for line in region.splitlines()}
    telling = {
        line for line in secret if re.search(r"[A-Za-z_]\w", line)
    }  # not "2," or ")"
    return {line for line in telling if line not in student}


def page_text(page: str) -> str:
    """A built page as its reader reads it: tags dropped (code keeps its lines), entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page_html(page)))


def article(page: str) -> str:
    """The page's own content, without the sidebar that links every page."""
    return (
        page_html(page)
        .split('<article class="bd-article"', 1)[1]
        .split("</article>", 1)[0]
    )


def test_the_guide_maps_every_lab_to_chapters():
    assert sorted(chapters_of_each_lab()) == grading.lab_names(LABS)
    assert all(chapters_of_each_lab().values())


@pytest.mark.parametrize("lab", grading.lab_names(LABS))
def test_student_version_keeps_the_stubs_and_drops_solutions_and_hidden_tests(lab):
    source = "\n".join(cell.source for cell in student_version(lab).cells)
    assert "BEGIN SOLUTION" not in source and "HIDDEN TESTS" not in source
    assert "raise NotImplementedError()" in source
    assert secret_lines(lab), "the instructor notebook has solutions to hide"


@pytest.mark.grading
def test_student_version_is_what_release_hands_out(tmp_path):
    """The book's copy equals nbgrader's release, cell for cell (Lab 0)."""
    grading.release(LABS, tmp_path, only=["setup_check"])
    released = json.loads(
        (tmp_path / "release" / "setup_check" / "setup_check.ipynb").read_text()
    )
    ours = student_version("setup_check")
    assert ["".join(c["source"]) for c in released["cells"]] == [
        c.source for c in ours.cells
    ]


def test_the_labs_part_lists_every_lab_and_is_not_executed(tmp_path):
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p["caption"] == "Labs")
    assert sorted(c["file"] for c in part["chapters"]) == [
        f"book/labs/{lab}" for lab in grading.lab_names(LABS)
    ]
    captions = [
        p["caption"] for p in toc["parts"]
    ]  # after the chapters, before the appendix and reference
    assert captions[-3:] == ["Labs", "Appendix", "Reference"]
    written = grading.book_labs(LABS, tmp_path)
    assert all(
        json.loads(p.read_text())["metadata"]["mystnb"] == {"execution_mode": "off"}
        for p in written
    )


@pytest.mark.parametrize("lab", grading.lab_names(LABS))
def test_the_lab_page_is_a_handout_whose_points_are_nbgrader_s(lab, tmp_path):
    """The book's page of a lab: after its title, the graded tests with nbgrader's points and
    their total; every cell that only runs removed from the page (the stubs stay)."""
    from zerobook.classroom.handout import HANDOUT_ID, REMOVED

    grading.book_labs(LABS, tmp_path)
    cells = json.loads((tmp_path / f"{lab}.ipynb").read_text())["cells"]
    handout = next(c for c in cells if c["id"] == HANDOUT_ID)
    graded = [c["metadata"]["nbgrader"] for c in cells if c["metadata"].get("nbgrader")]
    total = sum(m["points"] for m in graded if m.get("grade") and m.get("points"))
    assert f"| **total** | **{total}** |" in "".join(handout["source"])
    for cell in cells:
        meta, tags = (
            cell["metadata"].get("nbgrader", {}),
            cell["metadata"].get("tags", []),
        )
        shown = cell["cell_type"] == "markdown" and not meta.get("solution")
        shown |= cell["cell_type"] == "code" and bool(meta.get("solution"))
        assert (REMOVED not in tags) == shown, "".join(cell["source"])[:80]


@pytest.mark.parametrize(
    "lab, chapter", [(lab, c) for lab, cs in chapters_of_each_lab().items() for c in cs]
)
def test_each_chapter_ends_with_a_pointer_to_its_lab(lab, chapter):
    last = json.loads((ROOT / f"{chapter}.ipynb").read_text())["cells"][-1]
    pointer = re.search(
        r"\{doc\}`(?:[^`<]+<)?\.\./book/labs/(\w+)>?`", "".join(last["source"])
    )
    assert last["cell_type"] == "markdown" and pointer and pointer.group(1) == lab


def load_module(path):
    """A module of the book's tooling (book/_ext, book/pdf.py: not a package)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("url", ["", "https://github.com/someone/zero-from-scratch"])
def test_repository_and_launch_buttons_appear_only_with_a_repository_url(url):
    from types import SimpleNamespace

    buttons = load_module(ROOT / "book" / "_ext" / "repository_buttons.py")
    launch = {
        "notebook_interface": "jupyterlab",
        "colab_url": "https://colab.research.google.com",
    }
    config = SimpleNamespace(
        html_theme_options={"repository_url": url, "launch_buttons": dict(launch)}
    )
    buttons.show_when_published(None, config)
    assert config.html_theme_options["use_repository_button"] == bool(url)
    assert ("colab_url" in config.html_theme_options["launch_buttons"]) == bool(url)


def test_no_placeholder_repository_is_shipped():
    assert yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"] == ""


@needs_book
@pytest.mark.book
@pytest.mark.parametrize("lab", grading.lab_names(LABS))
def test_lab_page_shows_the_student_version_only(lab):
    text = page_text(f"book/labs/{lab}")
    assert (
        "raise NotImplementedError()" in text
        and "BEGIN SOLUTION" not in text
        and "HIDDEN TESTS" not in text
    )
    # a handout: its points and how to start, no empty answer box or unexecuted test
    assert "This lab at a glance" in text and "To start." in text
    assert "YOUR ANSWER HERE" not in text and "the_run()" not in text
    leaked = [line for line in secret_lines(lab) if line in text]
    assert not leaked, (
        f"the page shows lines of the solution or hidden tests: {leaked[:5]}"
    )


@needs_book
@pytest.mark.book
@pytest.mark.parametrize(
    "lab, chapter", [(lab, c) for lab, cs in chapters_of_each_lab().items() for c in cs]
)
def test_each_chapter_page_links_to_its_lab(lab, chapter):
    assert f'href="../book/labs/{lab}.html"' in article(chapter)
    assert (HTML / "book" / "labs" / f"{lab}.html").is_file()


@needs_book
@pytest.mark.book
def test_the_shipped_book_has_no_repository_or_launch_buttons():
    for page in ("chapters/launching", "book/labs/setup_check"):
        assert "launch-buttons" not in page_html(page) and "fa-github" not in page_html(
            page
        )


def letters(text: str) -> str:
    """Text without spaces or line breaks, ligatures undone ("ﬄ"): as a PDF's text compares."""
    import unicodedata

    return "".join(unicodedata.normalize("NFKC", text).split())


def titles_found(reader) -> list[tuple[str, bool]]:
    """Each bookmark's title (its number dropped), and whether its page's text holds it."""
    found = []
    for item in reader.outline:
        name = re.sub(r"^[\d.]+ ", "", item.title)
        page = reader.pages[reader.get_destination_page_number(item)]
        found.append((name, letters(name) in letters(page.extract_text())))
    return found


@needs_book
@pytest.mark.book
def test_pages_print_to_one_pdf_with_a_bookmark_and_the_title_of_each(tmp_path):
    """book/pdf.py's printing and merging on two pages (make pdf does every page: `make pdf`)."""
    from pypdf import PdfReader

    from browser import chromium

    pdf = load_module(ROOT / "book" / "pdf.py")
    pages = [HTML / "book" / "intro.html", HTML / "chapters" / "launching.html"]
    parts = [
        (pdf.title(p), pdf.print_page(chromium(), p, tmp_path / f"{i}.pdf"))
        for i, p in enumerate(pages)
    ]
    count = pdf.merge(parts, tmp_path / "book.pdf")
    reader = PdfReader(tmp_path / "book.pdf")
    assert count == len(reader.pages) > len(pages)
    found = titles_found(reader)
    assert [t for t, _ in found] == [re.sub(r"^[\d.]+ ", "", t) for t, _ in parts]
    assert all(ok for _, ok in found), found


@pytest.mark.book
@pytest.mark.skipif(
    not (ROOT / "_build" / "pdf" / "book.pdf").is_file(),
    reason="no PDF: run `make pdf`",
)
def test_the_book_pdf_holds_every_page_of_the_toc_and_the_intro_links_to_it():
    from pypdf import PdfReader

    pdf = load_module(ROOT / "book" / "pdf.py")
    reader = PdfReader(pdf.PDF)
    pages = pdf.toc_pages(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    assert len(reader.outline) == len(pages) and len(reader.pages) >= len(pages)
    found = titles_found(reader)
    assert all(ok for _, ok in found), found
    assert pdf.PUBLISHED.read_bytes() == pdf.PDF.read_bytes()
    link = os.path.relpath(pdf.PUBLISHED, HTML / "book")
    assert f'href="{link}"' in page_html("book/intro")


def test_the_intro_links_to_the_pdf_only_once_it_is_printed(tmp_path):
    """make book leaves the intro's slot empty (no link to a file that is not there); make pdf
    fills it after copying the PDF into the HTML output."""
    pdf = load_module(ROOT / "book" / "pdf.py")
    assert pdf.SLOT in (ROOT / "book" / "intro.md").read_text()
    intro = tmp_path / "intro.html"
    intro.write_text(f"<main>{pdf.SLOT}</main>")
    pdf.link_from_intro(intro)
    assert 'href="' in intro.read_text() and "book.pdf</a>" in intro.read_text()


@needs_book
@pytest.mark.book
def test_search_lists_the_glossary_once_named_after_the_term(browser):
    """book/_static/zerobook.js: the term's hit, not the page's too (both were titled "Glossary")."""
    from browser import search_finished

    load(browser, "search.html", "?q=rank")
    search_finished(browser)
    links = [a for a in browser.find_elements("css selector", "#search-results li > a")]
    glossary = [
        (a.text, a.get_attribute("href").split("/")[-1])
        for a in links
        if "glossary.html" in a.get_attribute("href")
    ]
    assert glossary == [("Glossary › rank", "glossary.html#term-rank")]
    assert len(links) > 2


WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"


def workflow_steps() -> list[dict]:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    return [step for job in jobs.values() for step in job["steps"]]


def test_the_pages_workflow_builds_with_the_readme_s_command_and_deploys():
    readme = (
        (ROOT / "README.md")
        .read_text()
        .split("## Publishing the book", 1)[1]
        .split("\n## ", 1)[0]
    )
    command = re.search(r"```bash\n([^#\n]+?)\s*(#.*)?\n```", readme).group(1)
    steps = workflow_steps()
    assert command in [s.get("run") for s in steps]
    used = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert used == [
        "actions/checkout",
        "actions/setup-python",
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    ]


@pytest.mark.parametrize("url", ["", "https://github.com/someone/zero-from-scratch"])
def test_the_pages_workflow_reads_the_repository_url_as_the_book_does(url, tmp_path):
    """Its first step's shell reads _config.yml's repository.url: empty, nothing is published."""
    import subprocess

    text = (ROOT / "_config.yml").read_text()  # as shipped: empty
    if url:
        text = text.replace('  url: ""', f"  url: {url}", 1)
        assert yaml.safe_load(text)["repository"]["url"] == url
    (tmp_path / "_config.yml").write_text(text)
    step = next(s for s in workflow_steps() if s.get("id") == "published")
    subprocess.run(
        ["bash", "-c", step["run"]],
        cwd=tmp_path,
        check=True,
        env=dict(os.environ, GITHUB_OUTPUT=str(tmp_path / "out")),
    )
    assert (tmp_path / "out").read_text() == f"url={url}\n"
