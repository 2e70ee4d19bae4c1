"""The built book's links, length and what a reader is shown: every local link and image resolves
(file and anchor); a chapter's page holds at most 8,000 words in all; no page or released lab
shows a placeholder for an address the course does not have (`<you>`, `example.edu`): the
repository is one setting, _config.yml's `repository.url`."""

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import ROOT
from test_book import HTML, needs_book, pages

pytestmark = pytest.mark.book
PLACEHOLDERS = ("<you>", "&lt;you&gt;", "example.edu")
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
MAX_PAGE_WORDS = 8_000  # a chapter's page in all: prose, code, outputs, tables


class Links(HTMLParser):
    """Each href and src of a page, and each id it defines."""

    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.ids.update(v for k, v in attrs.items() if k in ("id", "name") and v)
        for key in ("href", "src"):
            if attrs.get(key) and not (tag == "link" and attrs.get("rel") == "preload"):
                self.links.append(attrs[key])


def parsed(path: Path) -> Links:
    found = Links()
    found.feed(path.read_text(errors="replace"))
    return found


def local_link_problems(page: Path) -> list[str]:
    """The page's local links whose file, or anchor in it, is not in the built book."""
    problems, cache = [], {}
    for link in parsed(page).links:
        parts = urlsplit(link)
        if parts.scheme or link.startswith(("//", "mailto:", "javascript:", "data:")):
            continue
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not target.exists():
            problems.append(f"{link}: no {target.name}")
        elif parts.fragment and target.suffix == ".html":
            ids = cache.setdefault(target, parsed(target).ids)
            if unquote(parts.fragment) not in ids:
                problems.append(f"{link}: no #{parts.fragment} in {target.name}")
    return problems


@needs_book
@pytest.mark.parametrize("page", pages())
def test_every_local_link_of_the_page_resolves(page):
    problems = local_link_problems((HTML / f"{page}.html").resolve())
    assert not problems, f"{page}: {problems}"


@needs_book
@pytest.mark.parametrize("page", pages())
def test_no_page_shows_a_placeholder_address(page):
    text = (HTML / f"{page}.html").read_text()
    shown = [p for p in PLACEHOLDERS if p in text]
    assert not shown, f"{page} shows {shown}"


def test_no_student_version_or_course_page_names_a_placeholder_address():
    """The sources a reader or student sees: the book's pages, the chapters, the labs (their
    Colab cell is zerobook/assets/colab_first_cell.py), the README and _config.yml."""
    sources = [ROOT / "README.md", ROOT / "_config.yml"]
    sources += [*ROOT.glob("book/*.md"), *ROOT.glob("chapters/*.ipynb")]
    sources += [*ROOT.glob("labs/*/*.ipynb"), *ROOT.glob("zerobook/assets/*")]
    shown = {
        str(p.relative_to(ROOT)): found
        for p in sources
        if (found := [x for x in ("<you>", "example.edu") if x in p.read_text()])
    }
    assert not shown, shown


def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path, monkeypatch):
    import test_book_links

    monkeypatch.setattr(test_book_links, "HTML", tmp_path)
    (tmp_path / "b.html").write_text('<p id="here">b</p>')
    page = tmp_path / "a.html"
    page.write_text(
        '<a href="b.html#here">ok</a><a href="b.html#gone">x</a><a href="c.pdf">y</a>'
        '<a href="https://x.org/z">remote</a><a href="#top">self</a><p id="top"></p>'
    )
    problems = local_link_problems(page)
    assert [re.sub(r":.*", "", p) for p in problems] == ["b.html#gone", "c.pdf"]


@needs_book
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_built_page_holds_at_most_8000_words_in_all(path):
    built = HTML / "chapters" / f"{path.stem}.html"
    article = re.search(
        r'<article class="bd-article".*?</article>', built.read_text(), re.S
    )
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", article.group(0), flags=re.S)
    words = len(re.sub(r"<[^>]+>", " ", text).split())
    assert words <= MAX_PAGE_WORDS, f"{path.stem}: {words} words on the page"
