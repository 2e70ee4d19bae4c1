"""Paths in what a student reads, as the course names them, not as the grading machine has them.

A traceback in feedback names files by where they lie on the instructor's machine: the
virtual environment, the course's checkout, a temporary folder. `relative_paths` rewrites
each to what the student knows it by: `torch/nn/modules/module.py` (anything under
site-packages), `zerobook/labs/ddp.py` (the course's package), `threading.py` (Python's own
library), and the student's own file by its name (in a temporary folder or the submission's
folder), its line numbers kept. `output_relative` does so to one notebook output.
"""

from __future__ import annotations

import functools
import os
import re
import sysconfig
import tempfile
from pathlib import Path

# a colour code (IPython's tracebacks): a path may follow its "m"
ANSI = re.compile(r"(\x1b\[[0-9;]*[A-Za-z])")
START = r"(?<![\w./~-])"  # a path starts here, not inside a longer path or word
SITE = re.compile(r"/(?:site|dist)-packages/")  # see without_site_packages
OUTSIDE = set(" \t\n\r\f\v\"'<>()[]{},;:=")  # what ends a path shown in text
TEMPORARY = ("/tmp", "/var/tmp", "/dev/shm")
TREE = r"/(?:[^\s\"'<>/:]+/)*"  # a folder's subfolders, down to the file's name


def variants(folder: str) -> list[str]:
    """`folder` as written, its real path, and as IPython writes a path under the home folder."""
    home = os.path.expanduser("~").rstrip("/")
    out = []
    for path in dict.fromkeys([folder.rstrip("/"), os.path.realpath(folder)]):
        out.append(path)
        if home and path.startswith(home + "/"):
            out.append("~" + path[len(home) :])
    return out


@functools.lru_cache(maxsize=64)
def cuts(folders: tuple[str, ...] = ()) -> list:
    """The rewrites, each a function of text, most specific first: the student's folders,
    site-packages, the course's checkout and Python's library (the longest first: a venv may
    lie in the checkout); then a temporary folder with all its subfolders."""
    import zerobook

    course = str(Path(zerobook.__file__).resolve().parents[1])
    library = [sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib")]
    known = sorted(
        {v for f in [course, *library] for v in variants(f)}, key=len, reverse=True
    )
    sub = lambda pattern: functools.partial(pattern.sub, "")
    prefix = lambda path: sub(re.compile(START + re.escape(path) + "/"))
    temporary = dict.fromkeys([tempfile.gettempdir(), *TEMPORARY])
    return [
        *(prefix(v) for f in folders for v in variants(f)),
        without_site_packages,
        *(prefix(path) for path in known),
        *(sub(re.compile(START + re.escape(t.rstrip("/")) + TREE)) for t in temporary),
    ]


def relative_paths(text: str, folders=()) -> str:
    """`text` with every absolute path rewritten as the course names it (see the module);
    `folders`: where the student's own files lie, shown by their names."""
    rewrites = cuts(tuple(map(str, folders)))
    parts = ANSI.split(text)
    for i in range(0, len(parts), 2):  # the odd parts are colour codes
        for rewrite in rewrites:
            parts[i] = rewrite(parts[i])
    return "".join(parts)


def without_site_packages(text: str) -> str:
    """`text` with each path's part up to its site-packages/ cut (a path: / or ~ and what
    follows, up to a character of OUTSIDE); each character looked at once, whatever the text."""
    out, done = [], 0
    for found in SITE.finditer(text):
        start = found.start()
        while start > done and text[start - 1] not in OUTSIDE:
            start -= 1
        whole = text[start] in "/~" and (start == 0 or text[start - 1] in OUTSIDE)
        out.append(text[done:start] if whole else text[done : found.end()])
        done = found.end()
    return "".join(out) + text[done:]


def output_relative(output: dict, folders=()) -> dict:
    """One notebook output with relative_paths applied to the text it shows: a stream, an
    error's value and traceback, text data (a string or a list of strings; anything else is
    left as it is: the student's kernel made it)."""

    def fix(value):
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [relative_paths(v, folders) for v in value]
        return relative_paths(value, folders) if isinstance(value, str) else value

    for key in ("text", "evalue", "traceback"):
        if key in output:
            output[key] = fix(output[key])
    data = output.get("data")
    for kind in (
        [k for k in data if str(k).startswith("text/")]
        if isinstance(data, dict)
        else []
    ):
        data[kind] = fix(data[kind])
    return output
