"""The built book as one PDF, offline: headless Chromium prints each page of the table of contents,
in its order, and pypdf merges them, one bookmark per page.

    .venv/bin/python book/pdf.py    # make pdf: _build/html -> _build/pdf/book.pdf

The PDF is also copied into the HTML output (`_build/html/_static/book.pdf`), and only then does the
built intro get its link to it (`link_from_intro`: a book without the PDF has no link to one). Chromium is found on PATH (`chromium`, `chromium-browser`,
`google-chrome`) or named by $CHROMIUM. What the print leaves out (navigation, sidebars) and how code
wraps is book/_static/zerobook.css's `@media print`.
"""

import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
PDF = ROOT / "_build" / "pdf" / "book.pdf"
PUBLISHED = HTML / "_static" / "book.pdf"  # what the built intro links to, once printed
INTRO = HTML / "book" / "intro.html"
SLOT = '<p id="book-pdf"></p>'  # book/intro.md's place for the link
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# --virtual-time-budget: the page's scripts (MathJax typesetting) run to the end before printing.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-pdf-header-footer",
    "--virtual-time-budget=20000",
    "--no-first-run",
    "--disable-background-networking",
]


def toc_pages(toc: dict) -> list[str]:
    """The pages in reading order: the root, then each part's chapters and their sections."""

    def walk(entries):
        for entry in entries:
            yield entry["file"]
            yield from walk(entry.get("sections", []))

    return [toc["root"]] + [
        page for part in toc.get("parts", []) for page in walk(part["chapters"])
    ]


def browser() -> str:
    """Headless Chromium: $CHROMIUM, or the first of BROWSERS on PATH."""
    found = os.environ.get("CHROMIUM") or next(
        filter(None, map(shutil.which, BROWSERS)), None
    )
    if not found:
        sys.exit(
            f"make pdf needs headless Chromium: none of {', '.join(BROWSERS)} is on PATH "
            "(Debian: apt-get install chromium), nor is $CHROMIUM set"
        )
    return found


def print_page(chromium: str, page: Path, pdf: Path) -> Path:
    """One built HTML page printed to `pdf` (its own profile: prints run side by side)."""
    with tempfile.TemporaryDirectory(prefix="zerobook-pdf-") as profile:
        subprocess.run(
            [
                chromium,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--print-to-pdf={pdf}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
    if not pdf.is_file():
        sys.exit(f"Chromium printed nothing for {page}")
    return pdf


def title(page: Path) -> str:
    """The page's title, without the book's name after it."""
    found = re.search(r"<title>(.*?)</title>", page.read_text(), re.S)
    return (
        html.unescape(found.group(1)).rsplit(" — ", 1)[0].strip()
        if found
        else page.stem
    )


def merge(parts: list[tuple[str, Path]], out: Path) -> int:
    """Concatenate the pages' PDFs into `out`, one bookmark per page; the number of PDF pages."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    for name, pdf in parts:
        start = len(writer.pages)
        writer.append(str(pdf))
        writer.add_outline_item(name, start)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        writer.write(f)
    return len(writer.pages)


def link_from_intro(intro: Path = INTRO) -> None:
    """The built intro's empty paragraph (SLOT) becomes the link to the published PDF."""
    link = os.path.relpath(PUBLISHED, intro.parent)
    text = intro.read_text()
    filled = f'<p id="book-pdf">The whole book is also one PDF, <a href="{link}">book.pdf</a>.</p>'
    if SLOT in text:
        intro.write_text(text.replace(SLOT, filled))


def main() -> None:
    pages = [
        HTML / f"{p}.html"
        for p in toc_pages(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    ]
    missing = [str(p) for p in pages if not p.is_file()]
    if missing:
        sys.exit(f"build the book first (make book): {', '.join(missing[:3])} missing")
    chromium = browser()
    with tempfile.TemporaryDirectory(prefix="zerobook-pdf-") as tmp:
        pdfs = [Path(tmp) / f"{i:03d}.pdf" for i in range(len(pages))]
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda args: print_page(chromium, *args), zip(pages, pdfs)))
        count = merge([(title(p), pdf) for p, pdf in zip(pages, pdfs)], PDF)
    shutil.copyfile(PDF, PUBLISHED)
    link_from_intro()
    print(
        f"{len(pages)} pages of the book printed: {count} PDF pages in {PDF} (and {PUBLISHED})"
    )


if __name__ == "__main__":
    main()
