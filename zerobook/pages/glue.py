"""`glue(name, value)`: a value a chapter computed, kept for the book's `{glue}` references.

The book is built by Jupyter Book, whose MyST-NB reads what `myst_nb.glue` stored in a cell's
outputs: that is the function used wherever MyST-NB is installed (`make install` installs it).
A notebook opened elsewhere (Colab, a student's own Jupyter) has no book to fill in, so without
MyST-NB a glued value is only displayed when asked (`display=True`), as MyST-NB would show it.
"""

from __future__ import annotations


def glue(name: str, value, display: bool = True) -> None:
    """Keep `value` as `name` for the book; show it here too unless display=False."""
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show

            show(value)
        return
    myst_glue(name, value, display=display)
