"""Exercise answers that read in the book and in JupyterLab alike.

A chapter computes its answers in one cell that the book removes (tag `remove-cell`) and JupyterLab
collapses, source and output (`jupyter.source_hidden`, `outputs_hidden`). Each `answer(name, value)`
glues the value for the book's folded answer ({glue:text}`name`, which jupyterlab-myst cannot fill
in: it shows the name) and prints `name = value`, so a student in JupyterLab who opens the cell's
output reads the number the answer names.
"""
from __future__ import annotations


def answer(name: str, value) -> None:
    """Glue `value` as `name` for the book (never displayed in place) and print `name = value`."""
    from myst_nb import glue

    glue(name, value, display=False)
    print(f"{name} = {value}")
