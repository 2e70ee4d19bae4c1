"""Exercise answers that read in the book and in JupyterLab alike.

A chapter computes its answers in one cell that the book removes (tag `remove-cell`) and JupyterLab
collapses (`jupyter.source_hidden`). Each `answer(name, value)` glues the value for the book's
folded answer ({glue:text}`name`, which jupyterlab-myst cannot fill in: it shows the name) and
shows, for JupyterLab, the name with its value folded under it (an HTML <details>, click to open),
so that running the cell gives nothing away and a student can still read the number an answer names.
"""

from __future__ import annotations

import html


def folded(name: str, value) -> str:
    """HTML: `name`, and its value shown only when opened."""
    return (
        f"<details><summary>&#9656; answer <code>{html.escape(name)}</code> (click to show)</summary>"
        f"<code>{html.escape(str(value))}</code></details>"
    )


def answer(name: str, value) -> None:
    """Glue `value` as `name` for the book (never displayed in place); display it folded for JupyterLab."""
    from IPython.display import HTML, display
    from zerobook.pages.glue import glue

    glue(name, value, display=False)
    display(HTML(folded(name, value)))
