"""The README's two pictures, taken from the built book in headless Chromium (offline).

    .venv/bin/python tests/screenshots.py      # after `make book`; writes book/_static/readme/

book.png: the ZeRO-3 chapter as a reader meets it (the saw-tooth of gathered bytes);
rank_output.png: a cell's rank-tagged output from the launching chapter (four ranks, one run).
"""

import sys
import time
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser import driver  # noqa: E402

HTML, OUT = ROOT / "_build" / "html", ROOT / "book" / "_static" / "readme"


def shoot(browser, page: str, selector: str, path: Path, window: bool = False) -> None:
    """Scroll the first element matching `selector` into view; save a screenshot of it, or of the
    whole window around it (the book's navigation included)."""
    browser.get((HTML / page).as_uri())
    element = browser.find_element("css selector", selector)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    time.sleep(2)  # MathJax and the fonts settle
    if window:
        browser.save_screenshot(str(path))
    else:
        element.screenshot(str(path))
    print(path.relative_to(ROOT))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    browser = driver(tempfile.mkdtemp())
    browser.set_window_size(1280, 1000)
    try:
        shoot(browser, "chapters/zero3.html", "figure", OUT / "book.png", window=True)
        shoot(
            browser, "chapters/launching.html", ".cell_output", OUT / "rank_output.png"
        )
    finally:
        browser.quit()


if __name__ == "__main__":
    main()
