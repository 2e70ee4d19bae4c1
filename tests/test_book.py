"""The built book (`make book` first; `make test` does it): every page, as a reader meets it.

The browser tests use headless Chromium. Where it is missing they skip, saying why, unless
REQUIRE_BROWSER=1 (as in CI), where they fail.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from a11y import (
    CONTRAST,
    WCAG21_AA,
    code_contrast,
    forget_theme,
    serious_violations,
    switch_to_dark,
)
from browser import (
    SETTLE,
    driver,
    leaves_the_machine,
    requested_urls,
    search_finished,
)
from conftest import ROOT
from test_notebooks import toc_files

pytestmark = pytest.mark.book  # needs the built book: make test runs it after building

HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"

needs_book = pytest.mark.skipif(
    not (HTML / "index.html").exists(),
    reason="no built book in _build/html: run `make book` (make test does)",
)


def pages() -> list[str]:
    return sorted(toc_files())


def page_html(page: str) -> str:
    return (HTML / f"{page}.html").read_text()


@needs_book
@pytest.mark.parametrize("page", pages())
def test_every_page_of_the_table_of_contents_was_built(page):
    html = page_html(page)
    assert "<h1>" in html
    assert "highlight-ipythontb" not in html, f"{page} shows an error output"


@needs_book
def test_the_launch_chapter_shows_four_ranks_and_a_named_failure():
    text = re.sub(r"<[^>]+>", "", page_html("chapters/launching"))
    for rank in range(4):
        assert f"[rank{rank}] contributed {rank + 1}, all-reduce gave 10" in text
    assert text.count("[rank0] [zerobook] backend=gloo") == 1
    assert "rank 2 failed: RuntimeError: rank 2 fails on purpose" in text


@needs_book
@pytest.mark.parametrize("page", [p for p in pages() if p.startswith("chapters/")])
def test_every_plot_is_a_numbered_captioned_figure(page):
    html = page_html(page)
    images = re.findall(r'<img [^>]*src="[^"]*_images/', html)
    numbered = re.findall(
        r'<figcaption>\s*<p><span class="caption-number">Fig\. \d+(?:\.\d+)* </span>',
        html,
    )
    assert len(numbered) == len(images), (
        f"{len(images)} plots, {len(numbered)} numbered captions"
    )


@needs_book
def test_glossary_terms_link_to_their_definitions():
    glossary = page_html("book/glossary")
    terms = set(re.findall(r'<dt id="(term-[^"]+)"', glossary))
    linked = {
        t
        for page in pages()
        if page.startswith("chapters/")
        for t in re.findall(
            r'href="\.\./book/glossary\.html#(term-[^"]+)"', page_html(page)
        )
    }
    assert terms and linked <= terms and len(linked) >= len(terms) - 1, terms - linked


@needs_book
def test_each_page_offers_its_notebook_for_download():
    for page in pages():
        if page.startswith("chapters/"):
            assert (HTML / "_sources" / f"{page}.ipynb").is_file(), page
            assert f"_sources/{page}.ipynb" in page_html(page), page


@needs_book
def test_citations_link_the_work_and_the_references_list_it_under_that_name():
    """A citation is a link to the work named by author and year (it reads the same in
    JupyterLab); the References page lists the work under that name (book/_ext/author_year)."""
    intro = page_html("book/intro")
    assert re.search(
        r'href="https://arxiv\.org/abs/1910\.02054"[^>]*>Rajbhandari et al\., 2020<',
        intro,
    )
    references = re.sub(r"<[^>]+>", "", page_html("book/references"))
    assert "[Rajbhandari et al., 2020]" in references
    assert "[Patarasuk and Yuan, 2009]" in references


def test_a_notebook_that_raises_fails_the_build(tmp_path):
    """The book's own settings: an exception in any cell must fail `jupyter-book build`."""
    shutil.copy(ROOT / "_config.yml", tmp_path)
    shutil.copytree(ROOT / "book", tmp_path / "book")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: broken\n")
    (tmp_path / "broken.md").write_text(
        "---\nfile_format: mystnb\nkernelspec:\n  name: python3\n  display_name: Python 3\n---\n"
        "# Broken\n\n```{code-cell} python\n1 / 0\n```\n"
    )
    build = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "jupyter-book"),
            "build",
            str(tmp_path),
            "-W",
            "-n",
            "--keep-going",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TMPDIR=str(tmp_path)),  # Sphinx's error log stays here
    )
    assert build.returncode != 0
    assert "ZeroDivisionError" in build.stdout + build.stderr


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    session = driver(tmp_path_factory.mktemp("profile"))
    session.set_window_size(1280, 1600)
    yield session
    session.quit()


def load(browser, page: str, query: str = "") -> str:
    """Open a built page, wait until MathJax (if the page has any) has typeset; return the DOM."""
    # forget the previous page's
    browser.get_log("performance"), browser.get_log("browser")
    browser.get((HTML / page).as_uri() + query)
    browser.set_script_timeout(30)
    browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const ready = () => window.MathJax && MathJax.startup && MathJax.startup.promise;"
        "const wait = (n) => ready() ? MathJax.startup.promise.then(() => done(true))"
        "  : (n > 0 && !document.querySelector('.math') ? done(false) : setTimeout(() => wait(n - 1), 100));"
        "wait(50);"
    )
    return browser.page_source


WIDTHS = {"desktop": 1400, "phone": 400}
# Elements of the article whose content is wider than their box (they would scroll sideways or
# be cut), and how wide the page is: book/_static/zerobook.css wraps code and output lines.
# And what scrolls sideways in its own box with nothing in it the keyboard can reach (axe's
# scrollable-region-focusable, the rule of axe's set a page's width decides: checked here at
# every width, where axe itself runs on every page only at a desktop's).
OVERFLOW_JS = """
const wide = [...document.querySelectorAll('.bd-article pre')].filter(e => e.scrollWidth > e.clientWidth + 1);
const focusable = 'a[href], button, input, select, textarea, [tabindex]:not([tabindex="-1"])';
const unreachable = [...document.querySelectorAll('.bd-article *')].filter(e =>
  e.scrollWidth > e.clientWidth + 1 && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX)
  && !e.matches(focusable) && !e.querySelector(focusable));
return {page: document.scrollingElement.scrollWidth, window: window.innerWidth,
        wide: wide.map(e => e.textContent.split('\\n').reduce((a, b) => a.length > b.length ? a : b).slice(0, 100)),
        unreachable: unreachable.map(e => e.tagName.toLowerCase() + '.' + e.className + ': ' + e.textContent.slice(0, 60))};
"""
# Item by item, what is wider than the column (book/_static/zerobook.js): a table or display
# equation fits or scrolls in its own box, which takes the keyboard's focus and shows its cue (a
# shadow at the right edge) while more lies to the right; a figure is drawn at >= 3/4 of its own
# size (its 9 pt text stays >= 9 px) and is never cut; no caption or header is cut off.
WIDE_JS = """
const article = document.querySelector('.bd-article');
const width = article.clientWidth, right = article.getBoundingClientRect().right;
const scrolls = (e) => { const box = e.closest('.zb-scroll');
  return box && box.scrollWidth > box.clientWidth + 1 && box.getAttribute('tabindex') === '0'
    && (box.scrollLeft + box.clientWidth >= box.scrollWidth - 1
        || box.parentElement.hasAttribute('data-more')
           && getComputedStyle(box.parentElement, '::after').opacity === '1'); };
const name = (e) => e.textContent.trim().replace(/\\s+/g, ' ').slice(0, 50);
const problems = [];
for (const t of article.querySelectorAll('table'))
  if (t.getBoundingClientRect().width > width + 1 && !scrolls(t)) problems.push('table cut: ' + name(t));
for (const m of article.querySelectorAll('mjx-container[display="true"]'))
  if (m.getBoundingClientRect().right > right + 1 && !scrolls(m)) problems.push('equation cut: ' + name(m));
for (const i of article.querySelectorAll('figure img, .cell_output img')) {
  const scale = i.getBoundingClientRect().width / i.naturalWidth;
  if (i.naturalWidth && scale < 0.749) problems.push(`figure at ${scale.toFixed(2)} of its size: ${i.src.split('/').pop()}`);
  if (i.getBoundingClientRect().right > right + 1 && !scrolls(i)) problems.push('figure cut: ' + i.src.split('/').pop());
}
for (const c of article.querySelectorAll('figcaption, caption, th'))
  if (c.scrollWidth > c.clientWidth + 1 || c.getBoundingClientRect().right > right + 1 && !scrolls(c))
    problems.push('cut: ' + name(c));
return problems;
"""
# axe at a phone's width: on one page of each kind the theme lays out (the landing page, a
# chapter with figures, tables and widgets, a lab, the glossary), whose narrow-screen chrome is
# that of every page of its kind; each page's content is checked at a desktop's width (its
# colours light and dark: the theme's narrow-screen rules move boxes, not colours), and what
# only a narrow screen scrolls by OVERFLOW_JS at both.
PHONE_AXE = (
    "book/intro",
    "chapters/when_zero_pays",
    "book/labs/zero3",
    "book/glossary",
)


# The whole page saved as pictures for review only when asked (`make test SCREENSHOTS=1`, or
# tests/screenshots.py for the README's): encoding them took a quarter of the book tests' time.
SCREENSHOTS = os.environ.get("SCREENSHOTS") == "1"


def render_whole_page(browser) -> None:
    """Lay out and paint the whole page at once, as a full-page picture does, without encoding
    one: the viewport is made as tall as the page for two frames, so what loads late (lazy
    images, anything below the fold) is requested."""
    browser.execute_script(SETTLE)
    size = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {
            "width": int(size["width"]),
            "height": int(size["height"]),
            "deviceScaleFactor": 1,
            "mobile": False,
        },
    )
    try:
        browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 50)));"
        )
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def full_page_screenshot(browser, path, tile: int = 12_000) -> list:
    """The whole page, top to bottom, at the window's width (Chromium's DevTools protocol): PATH,
    then PATH_2, PATH_3, ... for each further `tile` pixels of a long page. Returns the files."""
    import base64

    # the theme slides its sidebar in after a resize: end every transition first, so the picture
    # is the page at rest (a shot taken mid-slide showed the article cut at the left)
    browser.execute_script(SETTLE)
    browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 50)));"
    )
    size = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    files = []
    for k, top in enumerate(range(0, int(size["height"]), tile)):
        clip = {
            "x": 0,
            "y": top,
            "width": size["width"],
            "height": min(tile, size["height"] - top),
            "scale": 1,
        }
        shot = browser.execute_cdp_cmd(
            "Page.captureScreenshot",
            # optimizeForSpeed: a faster PNG encoding (a larger file), the same pixels
            {"captureBeyondViewport": True, "clip": clip, "optimizeForSpeed": True},
        )
        files.append(path.with_name(f"{path.stem}_{k + 1}.png") if k else path)
        files[-1].write_bytes(base64.b64decode(shot["data"]))
    return files


def test_the_pages_axe_checks_at_a_phones_width_are_in_the_book():
    assert set(PHONE_AXE) <= set(pages())


@needs_book
@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
@pytest.mark.parametrize("page", pages())
def test_each_page_renders_offline_fits_its_width_and_passes_axe_light_and_dark(
    page, width, browser
):
    """Each page as a reader meets it, at a desktop's and a phone's width, loaded once: no
    request leaves the machine (tests/test_book_a11y.py also reads every built file for what
    it would load), no console error, the theme and the math rendered; the page never scrolls
    sideways and no code or output line is wider than the column; a wide table, equation or figure
    scrolls in its own box with a cue, a figure's text stays >= 9 px, no caption or header is cut
    (WIDE_JS); the whole page rendered (and,
    with SCREENSHOTS=1, saved for review in _build/screenshots); nothing scrolls in its own box
    out of the keyboard's reach; axe-core finds no serious or critical WCAG 2.1 A/AA
    violation in the light theme a reader meets first (at a phone's width: PHONE_AXE), and at
    a desktop's width, once the theme's switch has made it dark, its text (captions and outputs
    too) keeps AA contrast."""
    browser.set_window_size(width, 1000)
    try:
        dom = load(browser, f"{page}.html")
        remote = [u for u in requested_urls(browser) if leaves_the_machine(u)]
        assert not remote, f"{page} asked the network for {remote}"
        errors = [
            e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"
        ]
        assert not errors, errors
        assert "bd-article" in dom, "the theme's article body was not rendered"
        # MathJax (served with the book) typeset it
        if 'class="math' in page_html(page):
            assert "<mjx-container" in dom and "mjx-merror" not in dom
        fit = browser.execute_script(OVERFLOW_JS)
        assert fit["page"] <= fit["window"], (
            f"{page} scrolls sideways: {fit['page']} px wide in {fit['window']}"
        )
        assert not fit["wide"], f"{page}: lines wider than the column: {fit['wide']}"
        assert not fit["unreachable"], (
            f"{page} at {width} px scrolls these with no keyboard focus: {fit['unreachable']}"
        )
        browser.execute_async_script(  # every image loaded (zerobook.js sizes figures then)
            "const done = arguments[arguments.length - 1];"
            "Promise.all([...document.images].map(i => i.decode().catch(() => null)))"
            ".then(() => requestAnimationFrame(() => setTimeout(done, 50)));"
        )
        wide = browser.execute_script(WIDE_JS)
        assert not wide, f"{page} at {width} px: {wide}"
        if SCREENSHOTS:
            SHOTS.mkdir(parents=True, exist_ok=True)
            shot = SHOTS / f"{page.replace('/', '__')}_{width}.png"
            first, *rest = full_page_screenshot(browser, shot)
            assert first.stat().st_size > 10_000 and all(f.is_file() for f in rest)
        else:
            render_whole_page(browser)
        # the screenshot rendered the whole page: what loads late (lazy images, below the fold) too
        late = [u for u in requested_urls(browser) if leaves_the_machine(u)]
        assert not late, f"{page} asked the network for {late} once scrolled through"
        if width == WIDTHS["desktop"] or page in PHONE_AXE:
            found = serious_violations(browser, WCAG21_AA)
            assert not found, f"{page} at {width} px: {found}"
        if width == WIDTHS["desktop"]:
            found = code_contrast(browser)
            assert not found, f"{page}'s code cells below AA contrast: {found}"
            assert switch_to_dark(browser) == "dark"
            found = serious_violations(browser, CONTRAST) + code_contrast(browser)
            assert not found, f"{page} in the dark theme: {found}"
    finally:
        forget_theme(browser)
        browser.set_window_size(1280, 1600)


@needs_book
def test_search_works_offline(browser):
    load(browser, "search.html", "?q=reduce-scatter")
    search_finished(browser)
    found = browser.find_elements("css selector", "#search-results li")
    pages = {
        e.find_element("css selector", "a")
        .get_attribute("href")
        .split("/")[-1]
        .split("?")[0]
        for e in found
    }
    assert {"zero2.html", "zero3.html"} <= pages, pages
    assert not [u for u in requested_urls(browser) if leaves_the_machine(u)]


@needs_book
def test_the_stage_explorer_in_the_built_book_responds_to_its_slider(browser):
    from zerobook.accounting import memory

    load(browser, "chapters/memory_accounting.html")
    root = browser.find_element("css selector", ".zb-stage-explorer")
    heights = "return [...arguments[0].querySelectorAll('rect[data-kind=optimizer]')].map(r => +r.getAttribute('height'))"
    before = (
        float(root.get_attribute("data-total-bytes")),
        browser.execute_script(heights, root),
    )
    # right arrow
    root.find_element("css selector", "[data-role=stage]").send_keys("\ue014")
    after = (
        float(root.get_attribute("data-total-bytes")),
        browser.execute_script(heights, root),
    )
    expected = memory.model_state_bytes(7.5e9, stage=1, world_size=64).total
    assert after[0] == pytest.approx(expected, rel=1e-12) and after[0] < before[0]
    assert after[1][0] < before[1][0]  # the optimizer band shrank


@needs_book
def test_the_step_explorer_in_the_built_book_redraws_when_the_sharding_changes(browser):
    from selenium.webdriver.support.ui import Select

    load(browser, "chapters/when_zero_pays.html")
    root = browser.find_element("css selector", ".zb-step-explorer")
    before = float(root.get_attribute("data-step-s"))
    Select(root.find_element("css selector", "[data-role=method]")).select_by_value(
        "ZeRO-3, no prefetch"
    )
    after = float(root.get_attribute("data-step-s"))
    assert after > before  # without prefetch the same step waits for every gather
    assert root.find_elements("css selector", "rect[data-stream=communication]")
    assert not root.find_elements("css selector", "rect[data-stream=replicas]")
    Select(root.find_element("css selector", "[data-role=method]")).select_by_value(
        "HSDP (ZeRO-3 in each node)"
    )  # the replicas' all-reduce on a lane of its own (FSDP2's stream)
    assert root.find_elements("css selector", "rect[data-stream=replicas]")


@needs_book
@pytest.mark.parametrize("width", [400, 1280])
def test_the_visible_menu_button_opens_the_table_of_contents_on_a_phone_and_folds_it_on_a_desktop(
    tmp_path, width
):
    """The header's ☰ that a reader sees (the themes bind only a hidden twin: book/_static/zerobook.js).
    A browser of its own: folding the sidebar must not reach the pages the other tests screenshot."""
    browser = driver(tmp_path / "profile")
    browser.set_window_size(width, 900)
    try:
        load(browser, "chapters/zero1.html")
        sidebar = browser.find_element("css selector", "#pst-primary-sidebar")
        button = next(
            b
            for b in browser.find_elements("css selector", ".primary-toggle")
            if b.is_displayed()
        )
        was_shown = sidebar.is_displayed()
        button.click()
        if width < 992:  # a dialog with the chapters' links
            assert not was_shown and browser.find_element(
                "css selector", "#pst-primary-sidebar-modal"
            ).get_attribute("open")
            links = browser.find_elements(
                "css selector", "#pst-primary-sidebar-modal a.reference.internal"
            )
            assert any(link.is_displayed() and "ZeRO-2" in link.text for link in links)
        else:  # the sidebar folds away, and comes back
            from selenium.webdriver.common.action_chains import ActionChains
            from selenium.webdriver.support.ui import WebDriverWait

            hidden = lambda _: "pst-sidebar-hidden" in sidebar.get_attribute("class")
            assert was_shown and WebDriverWait(browser, 3).until(hidden)
            # as a reader would: click on the page (the button loses focus and its tooltip goes), then back
            ActionChains(browser).move_to_element(
                browser.find_element("css selector", ".bd-article h1")
            ).click().perform()
            WebDriverWait(browser, 5).until(
                lambda d: not d.find_elements("css selector", ".tooltip.show")
            )
            button = next(
                b
                for b in browser.find_elements("css selector", ".primary-toggle")
                if b.is_displayed()
            )
            button.click()
            assert WebDriverWait(browser, 3).until(lambda driver: not hidden(driver))
    finally:
        browser.quit()
