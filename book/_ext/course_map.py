"""Sphinx extension: the intro's map of the course, drawn at every build from the course's own
table of contents and "How to use"'s table of labs (zerobook/figures/course_map.py), into
book/_generated/ (git-ignored), where book/intro.md's figure finds it."""

from pathlib import Path

OUT = Path("book") / "_generated" / "course_map.svg"  # in the book's source folder


def draw(app) -> None:
    """Draw the map, when the book being built is the course (its root page is the intro)."""
    import yaml

    root = Path(app.srcdir)
    if yaml.safe_load((root / "_toc.yml").read_text()).get("root") != "book/intro":
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zerobook.figures.course_map import course_map

    (root / OUT).parent.mkdir(exist_ok=True)
    fig = course_map(root)
    fig.savefig(root / OUT, bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def setup(app):
    app.connect("builder-inited", draw)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
