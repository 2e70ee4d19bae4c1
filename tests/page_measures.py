"""How a chapter reads, measured from its notebook: words of prose, figures, long sentences,
bold sentences, the longest code cell shown unfolded. tests/test_pages.py holds every chapter to
the limits below; run it on a chapter while writing:

    .venv/bin/python tests/page_measures.py chapters/zeropp.ipynb
"""

import json
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from check_cells import HIDDEN  # noqa: E402

from zerobook.pages.reading import WORD, prose  # noqa: E402

MAX_PROSE = 3_000  # words of prose a chapter page
WORDS_PER_FIGURE = 1_500  # at least one figure for each (started) 1,500 words
MAX_LONG_SENTENCES = 5  # sentences of over LONG words a page
LONG = 40
MAX_SHOWN_LINES = 30  # non-blank lines of a code cell shown unfolded
MAX_BOLD_WORDS = 6  # bold marks a term, not a sentence
FIGURES_AT_LEAST = {"zeropp": 4, "gone_wrong": 3, "fsdp2_in_practice": 3}


def sentences(text: str) -> list[str]:
    """The sentences of prose: paragraphs, list items and headings end one too."""
    blocks = re.split(r"\n\s*\n|\n(?=\s*(?:[-*+] |\d+\. |#))", text)
    return [
        s
        for block in blocks
        for s in re.split(r"(?<=[.!?:;])\s+(?=[A-Z(“\"*])", " ".join(block.split()))
        if s
    ]


def measure(path: Path) -> dict:
    cells = json.loads(Path(path).read_text())["cells"]
    markdown = [
        prose("".join(c["source"])) for c in cells if c["cell_type"] == "markdown"
    ]
    raw = "\n\n".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
    )
    figures = sum("figure" in c["metadata"].get("mystnb", {}) for c in cells)
    figures += len(re.findall(r"[`:]{3}\{(?:figure|glue:figure)\}", raw))
    shown = [
        sum(bool(line.strip()) for line in "".join(c["source"]).splitlines())
        for c in cells
        if c["cell_type"] == "code"
        and not set(c["metadata"].get("tags", [])) & set(HIDDEN)
    ]
    words = sum(len(WORD.findall(text)) for text in markdown)
    long = [
        s for text in markdown for s in sentences(text) if len(WORD.findall(s)) > LONG
    ]
    bold = [  # within one paragraph of one cell's prose
        b
        for text in markdown
        for b in re.findall(r"\*\*((?:(?!\n\s*\n)[^*])+)\*\*", text)
        if len(b.split()) > MAX_BOLD_WORDS
    ]
    return {
        "prose words": words,
        "figures": figures,
        "figures needed": max(
            math.ceil(words / WORDS_PER_FIGURE),
            FIGURES_AT_LEAST.get(Path(path).stem, 0),
        ),
        "longest shown cell": max(shown, default=0),
        "long sentences": long,
        "bold sentences": bold,
        "printed source": sum(
            "inspect.getsource" in "".join(c["source"])
            for c in cells
            if c["cell_type"] == "code"
        ),
    }


def problems(path: Path) -> list[str]:
    """What of the page is over a limit, in words."""
    m, found = measure(path), []
    if m["prose words"] > MAX_PROSE:
        found.append(f"{m['prose words']} words of prose (at most {MAX_PROSE})")
    if m["figures"] < m["figures needed"]:
        found.append(
            f"{m['figures']} figures for {m['prose words']} words ({m['figures needed']})"
        )
    if m["longest shown cell"] > MAX_SHOWN_LINES:
        found.append(
            f"a shown cell of {m['longest shown cell']} lines (at most {MAX_SHOWN_LINES})"
        )
    if len(m["long sentences"]) > MAX_LONG_SENTENCES:
        found.append(
            f"{len(m['long sentences'])} sentences over {LONG} words (at most {MAX_LONG_SENTENCES})"
        )
    found += [f"a bold sentence: **{b}**" for b in m["bold sentences"]]
    if m["printed source"]:
        found.append(
            f"{m['printed source']} cells print source (use zb.pages.source.excerpt)"
        )
    return found


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(map(str, Path("chapters").glob("*.ipynb"))):
        m = measure(Path(name))
        print(
            f"{Path(name).stem}: "
            + ", ".join(
                f"{k} {len(v) if isinstance(v, list) else v}" for k, v in m.items()
            )
        )
        for s in m["long sentences"]:
            print(f"   long ({len(WORD.findall(s))}): {s[:140]}…")
        for p in problems(Path(name)):
            print("   PROBLEM:", p)
