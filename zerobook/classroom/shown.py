"""What a feedback page shows of a student's notebook: each output, each cell and the notebook's
metadata rebuilt from the parts the page can render, nothing copied whole. An output the page
cannot read (a value of the wrong type, an unknown kind, an image that is not base64) is shown as
one line that says so; the student's output never becomes an error of the grader's.

    cell["outputs"] = [shown.output(o) for o in cell.get("outputs", [])]
    notebook["metadata"] = shown.NOTEBOOK_METADATA

nbformat's schema allows any MIME type, each a string or a list of strings (any JSON value for
application/*json); the page renders these (nbconvert's HTML), and JSON as its text.
"""

from __future__ import annotations

import json
import re

CANNOT = "[an output the page cannot show]\n"
TEXTS = ("text/plain", "text/html", "text/markdown", "text/latex", "image/svg+xml")
IMAGES = ("image/png", "image/jpeg", "image/gif")
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
JSON_TEXT_CHARS = (
    200_000  # a JSON output shown as text, at most (cap() cuts it further)
)
# a feedback page's notebook: what nbconvert reads, none of the submission's own (widget state)
NOTEBOOK_METADATA = {
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
    "language_info": {"name": "python"},
}


def text(value) -> str | None:
    """A multiline string as nbformat writes one (a string, or a list of strings), or None."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return None


def cannot() -> dict:
    return {"output_type": "stream", "name": "stdout", "text": CANNOT}


def output(given) -> dict:
    """One output as the page shows it: a stream, an error, or data of the kinds it renders."""
    kind = given.get("output_type") if isinstance(given, dict) else None
    if kind == "stream":
        said = text(given.get("text"))
        name = given.get("name")
        if said is None or name not in ("stdout", "stderr"):
            return cannot()
        return {"output_type": "stream", "name": name, "text": said}
    if kind == "error":
        return error(given)
    if kind in ("display_data", "execute_result"):
        data = mimebundle(given.get("data"))
        if not data:
            return cannot()
        out = {"output_type": kind, "data": data, "metadata": {}}
        if kind == "execute_result":
            count = given.get("execution_count")
            out["execution_count"] = count if isinstance(count, int) else None
        return out
    return cannot()


def error(given: dict) -> dict:
    ename, evalue = given.get("ename"), given.get("evalue")
    if not (isinstance(ename, str) and isinstance(evalue, str)):
        return cannot()
    lines = given.get("traceback")
    ok = isinstance(lines, list) and all(isinstance(line, str) for line in lines)
    return {  # the page shows the traceback's lines: at least the error's own
        "output_type": "error",
        "ename": ename,
        "evalue": evalue,
        "traceback": lines if ok and lines else [f"{ename}: {evalue}"],
    }


def mimebundle(data) -> dict:
    """The kinds of `data` the page renders, each as text; JSON as its text."""
    if not isinstance(data, dict):
        return {}
    kept = {}
    for kind, value in data.items():
        said = text(value)
        if kind in TEXTS and said is not None:
            kept[kind] = said
        elif kind in IMAGES and said is not None and BASE64.fullmatch(said):
            kept[kind] = said
    jsons = [v for k, v in data.items() if isinstance(k, str) and k.endswith("json")]
    if jsons and "text/plain" not in kept:
        try:
            kept["text/plain"] = json.dumps(jsons[0], indent=1)[:JSON_TEXT_CHARS]
        except (TypeError, ValueError, RecursionError):
            pass
    return kept


def cell_metadata(given) -> dict:
    """A cell's metadata as the page needs it: nbgrader's, nothing else of the student's."""
    grader = given.get("nbgrader") if isinstance(given, dict) else None
    return {"nbgrader": grader} if isinstance(grader, dict) else {}
