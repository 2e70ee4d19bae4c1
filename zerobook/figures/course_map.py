"""The course on one page: each chapter, numbered as the book numbers it, grouped by part, and each
lab beside the chapters it makes the student build — read from the course's own table of contents
(_toc.yml), its pages' titles and "How to use"'s table of labs, so the map changes when they do.

    course_map(root).savefig("course_map.svg")   # book/_ext/course_map.py does, for the intro
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from zerobook.figures.style import PALETTE

ROW_IN = 0.27  # inches a chapter's row takes


@dataclass
class Chapter:
    page: str  # its path in the book, without a suffix: chapters/zero3
    number: int
    title: str
    part: str


@dataclass
class Lab:
    folder: str
    title: str
    chapters: list[str] = field(default_factory=list)


def page_title(root: Path, page: str) -> str:
    """The first heading of a page (Markdown or notebook)."""
    path = next(p for p in (root / f"{page}.ipynb", root / f"{page}.md") if p.exists())
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        text = "\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
        )
    else:
        text = path.read_text()
    return re.search(r"^# (.+)$", text, re.M).group(1).strip()


def chapters(root: Path) -> list[Chapter]:
    """The numbered parts' pages, numbered in order as the book does."""
    import yaml

    toc, found = yaml.safe_load((root / "_toc.yml").read_text()), []
    for part in toc["parts"]:
        if part.get("numbered"):
            for entry in part["chapters"]:
                page = entry["file"]
                found.append(
                    Chapter(
                        page, len(found) + 1, page_title(root, page), part["caption"]
                    )
                )
    return found


def labs(root: Path) -> list[Lab]:
    """How to use's table of labs: each lab's title and the chapters it comes after."""
    found = []
    for row in (root / "book" / "how_to_use.md").read_text().splitlines():
        folder = re.search(r"`labs/(\w+)/`", row)
        if row.startswith("|") and folder:
            cells = row.split("|")
            title = re.search(r"\{doc\}`([^<`]+?)\s*<", cells[1]).group(1)
            pages = re.findall(r"\{doc\}`\.\./(chapters/\w+)`", cells[3])
            found.append(Lab(folder.group(1), title, pages))
    return found


def course_map(root: Path):
    """Chapters down the left, grouped by part; each lab on the right, joined to its chapters.
    The columns are as wide as their longest title, measured once drawn (inches on the x axis)."""
    import matplotlib.pyplot as plt

    shown, labs_ = chapters(Path(root)), labs(Path(root))
    row = {c.page: i for i, c in enumerate(shown)}
    fig = plt.figure(figsize=(7, ROW_IN * len(shown) + 0.6))
    ax = fig.add_axes((0, 0, 1, 1))  # a data unit across is an inch of the figure
    ax.set(ylim=(len(shown) - 0.4, -1.2))
    ax.axis("off")
    colors = [
        PALETTE[c] for c in ("blue", "orange", "green", "vermillion", "purple", "sky")
    ]
    parts = list(dict.fromkeys(c.part for c in shown))
    color = {part: colors[k % len(colors)] for k, part in enumerate(parts)}
    titles = [
        ax.text(0.08, i, f"{c.number}. {c.title}", va="center", fontsize=9)
        for i, c in enumerate(shown)
    ]
    ax.text(0.08, -0.95, "Chapters: read", fontsize=10, fontweight="bold")
    for part in parts:
        first = min(row[c.page] for c in shown if c.part == part)
        ax.text(
            -0.1,
            first,
            part,
            ha="right",
            va="center",
            fontsize=9,
            color=color[part],
            fontweight="bold",
        )
    placed = lab_rows(labs_, row, len(shown))
    names = [
        ax.text(0, y, lab.title.replace(" — ", ": "), va="center", fontsize=9)
        for lab, y in placed
    ]
    inches = lambda texts: max(  # noqa: E731
        t.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi for t in texts
    )
    band = inches(titles) + 0.16
    lab_x = band + 0.55
    for i, c in enumerate(shown):
        ax.add_patch(
            plt.Rectangle((0, i - 0.42), band, 0.84, color=color[c.part], alpha=0.16)
        )
    ax.text(lab_x, -0.95, "Labs: you build it", fontsize=10, fontweight="bold")
    for (lab, y), name in zip(placed, names):
        for page in lab.chapters:
            ax.plot(
                [band, band + 0.2, lab_x - 0.12],
                [row[page], row[page], y],
                color="dimgrey",
                lw=0.8,
            )
        ax.plot([lab_x - 0.08], [y], marker="s", color="black", markersize=4)
        name.set_x(lab_x)
    width = lab_x + inches(names) + 0.05
    ax.set_xlim(0, width)
    fig.set_size_inches(width, fig.get_size_inches()[1])
    return fig


def lab_rows(
    labs_: list[Lab], row: dict[str, int], rows: int
) -> list[tuple[Lab, float]]:
    """Each lab at the mean row of its chapters (in that order, so no two joins cross), pushed
    down until no two labels overlap, and up again if the last fell below the last chapter."""
    mean = lambda lab: sum(row[p] for p in lab.chapters) / max(len(lab.chapters), 1)  # noqa: E731
    ordered = sorted(labs_, key=mean)
    placed, last = [], -1.0
    for lab in ordered:
        last = max(mean(lab), last + 1.0)
        placed.append(last)
    for k in range(
        len(placed) - 1, -1, -1
    ):  # pull up from the bottom, keeping the spacing
        limit = rows - 1 if k == len(placed) - 1 else placed[k + 1] - 1.0
        placed[k] = min(placed[k], limit)
    return list(zip(ordered, placed))
