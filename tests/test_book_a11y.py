"""The built book for every reader: figures described, nothing loaded from another host (axe-core
runs on every page in tests/test_book.py) (`make book` first; the browser tests skip without Chromium, as in
tests/test_book.py)."""

import hashlib
import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from a11y import AXE, code_contrast, contrast_ratio, serious_violations
from browser import driver
from test_book import HTML, WIDTHS, load, needs_book, page_html, pages

pytestmark = pytest.mark.book


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    session = driver(tmp_path_factory.mktemp("profile"))
    yield session
    session.quit()


def test_the_vendored_axe_core_is_the_release_its_readme_names():
    readme = (AXE / "README.md").read_text()
    digest = hashlib.sha256((AXE / "axe.min.js").read_bytes()).hexdigest()
    version = re.search(r"axe-core (\d+\.\d+\.\d+)", readme).group(1)
    assert digest in readme
    assert (AXE / "axe.min.js").read_text()[:40].startswith(f"/*! axe v{version}")
    assert "Mozilla Public License" in (AXE / "LICENSE").read_text()


class Figures(HTMLParser):
    """Each <img> of a page with its alt text and the caption of the figure holding it."""

    def __init__(self):
        super().__init__()
        self.images, self.caption, self.in_caption = [], None, False

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append({"alt": dict(attrs).get("alt") or "", "caption": None})
        elif tag == "figcaption":
            self.in_caption, self.caption = True, ""

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self.in_caption = False
            if self.images and self.images[-1]["caption"] is None:
                self.images[-1]["caption"] = self.caption

    def handle_data(self, data):
        if self.in_caption:
            self.caption += data


def words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def alt_problems(html: str) -> list[str]:
    """What is wrong with the alt text of each <img> of a page: missing, shorter than a
    sentence, or the caption again (or a piece of it)."""
    figures, problems = Figures(), []
    figures.feed(html)
    for image in figures.images:
        alt, caption = words(image["alt"]), words(image["caption"] or "")
        caption = re.sub(r"^fig \d+(?: \d+)* ", "", caption)
        if len(alt.split()) < 12:
            problems.append(f"no description: {alt!r}")
        elif alt in caption or caption in alt:
            problems.append(f"the caption again: {alt!r}")
    return problems


def test_the_figure_check_finds_a_missing_or_repeated_description():
    caption = (
        "Bytes per GPU at each ZeRO stage, for a model of 7.5B parameters on 64 GPUs"
    )
    figure = (
        '<figure><img src="a.svg" alt="{}"><figcaption><p><span class="caption-number">'
        "Fig. 3.1 </span>{}</p></figcaption></figure>"
    )
    assert alt_problems(figure.format("", caption)) == ["no description: ''"]
    assert alt_problems(figure.format(caption, caption))[0].startswith(
        "the caption again"
    )
    shown = (
        "Four bars falling from 120 GB for DDP to 1.88 GB for ZeRO-3, every part cut"
    )
    assert alt_problems(figure.format(shown, caption)) == []


@needs_book
@pytest.mark.parametrize("page", [p for p in pages() if p.startswith("chapters/")])
def test_every_figure_says_what_its_data_shows(page):
    """Alt text for a reader who cannot see the plot: present, a description of its own
    (not the caption again, nor a piece of it), of at least a sentence
    (the cells' metadata.mystnb.image.alt)."""
    assert not alt_problems(page_html(page)), alt_problems(page_html(page))


# What a page *loads* (a link a reader may follow is not loaded): the attributes that fetch,
# and the <link> relations that only name another document.
LOADING_ATTRIBUTES = {
    "src",
    "srcset",
    "data",
    "poster",
    "background",
    "href",
    "xlink:href",
}
NAVIGATION = {
    "canonical",
    "alternate",
    "author",
    "help",
    "license",
    "next",
    "prev",
    "search",
    "index",
    "top",
    "first",
    "last",
    "up",
    "bookmark",
    "me",
}
CSS_URL = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])([^"')\s]+)""")


def remote(url: str) -> bool:
    parts = urlsplit(url.strip())
    return bool(parts.netloc) or parts.scheme not in {
        "",
        "data",
        "blob",
        "about",
        "javascript",
        "mailto",
        "file",
    }


class Loads(HTMLParser):
    """URLs that an HTML page would fetch from another host as it renders."""

    def __init__(self):
        super().__init__()
        self.remote, self.in_style = [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.in_style = tag == "style"
        if tag in ("a", "area") or (
            tag == "link" and set((attrs.get("rel") or "").split()) <= NAVIGATION
        ):
            return
        for name, value in attrs.items():
            if name == "style":
                self.remote += [u for u in CSS_URL.findall(value or "") if remote(u)]
            elif name in LOADING_ATTRIBUTES and value:
                urls = (
                    [u.split()[0] for u in value.split(",") if u.strip()]
                    if name == "srcset"
                    else [value]
                )
                self.remote += [f"<{tag} {name}> {u}" for u in urls if remote(u)]

    def handle_endtag(self, tag):
        self.in_style = False if tag == "style" else self.in_style

    def handle_data(self, data):
        if self.in_style:
            self.remote += [u for u in CSS_URL.findall(data) if remote(u)]


def remote_loads(html: str) -> list[str]:
    parser = Loads()
    parser.feed(html)
    return parser.remote


def test_the_scan_finds_what_a_page_would_load_and_passes_links():
    page = """<html><head><script src="https://cdn.example/require.js"></script>
    <link rel="stylesheet" href="//fonts.example/css"><link rel="next" href="https://x.example/">
    <link rel="preconnect" href="https://fonts.example"><style>@import "https://a.example/b.css";
    .x {background: url(http://img.example/a.png)}</style></head><body>
    <a href="https://arxiv.org/abs/1910.02054">the paper</a><img src="_images/a.svg" alt="x">
    <img srcset="a.png 1x, https://img.example/b.png 2x"><iframe src="https://nb.example/">
    </iframe><svg><image href="data:image/png;base64,AA"/></svg></body></html>"""
    assert remote_loads(page) == [
        "<script src> https://cdn.example/require.js",
        "<link href> //fonts.example/css",
        "<link href> https://fonts.example",
        "https://a.example/b.css",
        "http://img.example/a.png",
        "<img srcset> https://img.example/b.png",
        "<iframe src> https://nb.example/",
    ]


@needs_book
def test_no_built_file_loads_anything_from_another_host():
    """Every HTML page of the build (the table of contents' and the rest: search, index, the
    labs) and every style sheet: no script, style, font, image, frame or widget manager comes
    from another host. Links are fine. The browser test in tests/test_book.py checks the same
    from the requests Chromium makes."""
    found = {}
    for path in HTML.rglob("*.html"):
        found[str(path.relative_to(HTML))] = remote_loads(path.read_text())
    for path in HTML.rglob("*.css"):
        urls = CSS_URL.findall(path.read_text())
        found[str(path.relative_to(HTML))] = [u for u in urls if remote(u)]
    assert len(found) > len(pages())
    assert not {f: urls for f, urls in found.items() if urls}


@needs_book
def test_the_stage_explorer_says_what_its_sliders_show(browser):
    """By keyboard alone: a slider moved with the arrow keys announces the value written
    beside it ("64", "ZeRO-1 (P_os)"), not its raw position (log2 N), and the summary
    under the picture is a live region, read out as it changes."""
    browser.set_window_size(WIDTHS["desktop"], 1000)
    load(browser, "chapters/memory_accounting.html")
    root = browser.find_element("css selector", ".zb-stage-explorer")
    said = (
        "return [...arguments[0].querySelectorAll('input[type=range]')]"
        ".map(i => [i.getAttribute('aria-valuetext'), i.nextElementSibling.textContent])"
    )
    before = browser.execute_script(said, root)
    root.find_element("css selector", "[data-role=log2n]").send_keys("\ue014")  # right
    after = browser.execute_script(said, root)
    assert all(text and text == shown for text, shown in before + after), after
    assert after[1] != before[1] and after[1][0] == str(2 * int(before[1][0]))
    summary = root.find_element("css selector", "[data-out=summary]")
    assert summary.get_attribute("aria-live") == "polite" and "per GPU" in summary.text


def test_contrast_ratio_is_wcags():
    assert contrast_ratio("rgb(0, 0, 0)", "rgb(255, 255, 255)") == pytest.approx(21)
    assert contrast_ratio("rgb(255, 255, 255)", "rgb(255, 255, 255)") == pytest.approx(
        1
    )
    # #767676 on white is the lightest grey that passes AA, #777777 the darkest that fails
    assert contrast_ratio("rgb(118, 118, 118)", "rgb(255, 255, 255)") > 4.5
    assert contrast_ratio("rgb(119, 119, 119)", "rgb(255, 255, 255)") < 4.5


@needs_book
def test_a_code_cell_coloured_too_light_is_found_though_axe_leaves_code_out(browser):
    """A token of a code cell drawn in a grey too light for its background: axe, told to leave
    code cells out, does not see it; `code_contrast` names it."""
    load(browser, "chapters/zero3.html")
    assert not code_contrast(browser)
    browser.execute_script(
        "document.querySelector('.bd-article .highlight pre span.nf').style.color = '#aaa'"
    )
    contrast = {"runOnly": {"type": "rule", "values": ["color-contrast"]}}
    assert not serious_violations(browser, contrast)
    assert serious_violations(browser, contrast, context={"exclude": []})
    assert [f for f in code_contrast(browser) if "rgb(170, 170, 170)" in f]
