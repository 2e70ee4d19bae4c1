"""Sphinx extension: the intro's map of the course, drawn at every build from the course's own
table of contents and "How to use"'s table of labs (zerobook/figures/course_map.py), into
book/_generated/ (git-ignored), where book/intro.md's figure finds it."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "book" / "_generated" / "course_map.svg"


def draw(app) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zerobook.figures.course_map import course_map

    OUT.parent.mkdir(exist_ok=True)
    fig = course_map(ROOT)
    fig.savefig(OUT, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def setup(app):
    app.connect("builder-inited", draw)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
