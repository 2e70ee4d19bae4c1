"""`excerpt(thing, start=..., stop=...)`: the course's own code as a page shows it — highlighted,
cut to the lines the text discusses, and read from the module when the cell runs, so the book
always shows the module's current lines (a marker that is no longer there fails the cell).

The excerpt is Markdown holding a fenced Python block: the book (MyST-NB) and JupyterLab both
highlight it, in the page's own light or dark colours. A first comment names the file and lines.
"""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Excerpt:
    """Source code shown as a highlighted block (text/markdown), plain text elsewhere."""

    def __init__(self, blocks: list[str]):
        self.blocks = blocks

    def _repr_markdown_(self) -> str:
        return "\n\n".join(f"```python\n{block}\n```" for block in self.blocks)

    def __repr__(self) -> str:
        return "\n\n".join(self.blocks)


def lines_of(thing, start: str | None = None, stop: str | None = None) -> str:
    """`thing`'s source from the first line holding `start` to the next holding `stop`
    (both kept), headed by its file and line numbers; a marker not found raises."""
    thing = inspect.unwrap(
        thing
    )  # a decorated method's own lines and file (@torch.no_grad())
    lines, first = inspect.getsourcelines(thing)
    lines = textwrap.dedent("".join(lines)).splitlines()
    begin = 0 if start is None else find(lines, start, 0, thing)
    end = len(lines) - 1 if stop is None else find(lines, stop, begin, thing)
    while end < len(lines) - 1 and open_brackets(lines[begin : end + 1]) > 0:
        end += 1  # a cut never leaves a call or a literal open
    path = Path(inspect.getsourcefile(thing)).resolve()
    where = (
        path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    )
    body = textwrap.dedent("\n".join(lines[begin : end + 1]))
    numbers = f"{first + begin}–{first + end}" if end > begin else f"{first + begin}"
    return f"# {where}, line{'s' if end > begin else ''} {numbers}\n{body}"


def open_brackets(lines: list[str]) -> int:
    """How many brackets the lines leave open (strings and comments are not read apart: the
    course's code does not put brackets in them where a cut falls)."""
    text = "\n".join(lines)
    return sum(text.count(o) - text.count(c) for o, c in ("()", "[]", "{}"))


def find(lines: list[str], marker: str, after: int, thing) -> int:
    """The index of the first line from `after` on that holds `marker`."""
    for n in range(after, len(lines)):
        if marker in lines[n]:
            return n
    name = getattr(thing, "__qualname__", thing)
    raise ValueError(
        f"{marker!r} is no longer in the source of {name}: update the excerpt"
    )


def excerpt(*things, start: str | None = None, stop: str | None = None) -> Excerpt:
    """Each thing's source (a function, a method, a class), or one thing's lines from the
    line holding `start` to the line holding `stop`."""
    if (start or stop) and len(things) != 1:
        raise ValueError("start and stop cut one thing's source: pass one thing")
    return Excerpt([lines_of(thing, start, stop) for thing in things])
