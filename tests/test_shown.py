"""A student's output never becomes an error of the grader's (zerobook.classroom.shown): every
kind of output a kernel publishes, and malformed ones, goes through the feedback's scrub and
nbgrader's own feedback template; what the page cannot read is one line saying so. The red team's
`IPython.display.JSON([1, 2, 3])` made `feedback.cap` raise, its submission "not graded: the
course's side", and every later `grade` exit 1."""

import json

import pytest

from zerobook.classroom import feedback, shown

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def display(data, kind="display_data", **more):
    return {"output_type": kind, "data": data, "metadata": {}, **more}


# (what the kernel published, what the page shows of it)
OUTPUTS = {
    "json list (the red team's)": (
        display({"application/json": [1, 2, 3], "text/plain": "<JSON object>"}),
        "&lt;JSON object&gt;",
    ),
    "json alone": (
        display({"application/json": {"a": [1, {"b": None}]}}),
        '"b": null',
    ),
    "vendor json": (display({"application/vnd.custom+json": 7}), "7"),
    "html": (display({"text/html": ["<b>", "bold</b>"]}), "<b>bold</b>"),
    "markdown": (display({"text/markdown": "*md*"}), "md"),
    "latex": (display({"text/latex": "$x$"}), "$x$"),
    "svg": (display({"image/svg+xml": "<svg></svg>"}), "data:image/svg+xml;base64"),
    "png": (display({"image/png": PNG}), PNG[:20]),
    "result": (
        display({"text/plain": "42"}, "execute_result", execution_count=3),
        "42",
    ),
    "stream": ({"output_type": "stream", "name": "stdout", "text": ["a", "b\n"]}, "ab"),
    "error": (
        {"output_type": "error", "ename": "ValueError", "evalue": "v", "traceback": []},
        "ValueError",
    ),
    # malformed
    "text as a number": (display({"text/plain": 5}), shown.CANNOT.strip()),
    "text as numbers": (display({"text/plain": [1, 2]}), shown.CANNOT.strip()),
    "data not a dict": (display([1, 2]), shown.CANNOT.strip()),
    "png not base64": (display({"image/png": "<script>"}), shown.CANNOT.strip()),
    "only javascript": (display({"application/javascript": "x"}), shown.CANNOT.strip()),
    "widget view": (
        display({"application/vnd.jupyter.widget-view+json": {"model_id": "m"}}),
        "model_id",
    ),
    "unknown kind": ({"output_type": "surprise"}, shown.CANNOT.strip()),
    "not a dict": ("text", shown.CANNOT.strip()),
    "stream without name": (
        {"output_type": "stream", "text": "x"},
        shown.CANNOT.strip(),
    ),
    "error as dict": (
        {"output_type": "error", "ename": {"a": 1}, "evalue": "v"},
        shown.CANNOT.strip(),
    ),
    "traceback as a number": (
        {"output_type": "error", "ename": "E", "evalue": "v", "traceback": 3},
        "E",
    ),
    "count as text": (
        display({"text/plain": "1"}, "execute_result", execution_count="x"),
        "1",
    ),
}


def page_of(tmp_path, outputs, metadata=None, cells=None) -> str:
    """The feedback page nbgrader's template renders from a scrubbed notebook."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbgrader.converters import generate_feedback
    from pathlib import Path

    notebook = {
        "cells": cells
        or [
            {
                "cell_type": "code",
                "source": "show()",
                "metadata": {},
                "outputs": outputs,
                "execution_count": 1,
            }
        ],
        "metadata": metadata or {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "lab.ipynb"
    path.write_text(json.dumps(notebook))
    feedback.scrub(path)
    formgrader = Path(generate_feedback.__file__).parents[1] / "server_extensions"
    formgrader = formgrader / "formgrader"
    css = formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css"
    exporter = HTMLExporter(  # as nbgrader's GenerateFeedback sets it up
        template_name="feedback",
        extra_template_basedirs=[str(formgrader / "templates")],
        extra_template_paths=[str(css)],
    )
    resources = {"nbgrader": {"notebook": "lab", "score": 0, "max_score": 1}}
    resources["nbgrader"]["late_penalty"] = 0
    page, _ = exporter.from_notebook_node(
        nbformat.reads(path.read_text(), as_version=4), resources=resources
    )
    return page


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_every_output_a_kernel_can_publish_renders_or_says_it_cannot(tmp_path, name):
    output, says = OUTPUTS[name]
    assert says in page_of(tmp_path, [output]), name


def test_the_notebooks_metadata_and_a_cells_own_are_not_carried_to_the_page(tmp_path):
    """Widget state (a hidden test's source could be written there) is the student's, not the
    page's; a cell's source or metadata of the wrong type does not stop the page."""
    secret = "a hidden test's source, smuggled"
    metadata = {"widgets": {"state": {"x": secret}}, "language_info": {"name": 3}}
    odd = {
        "cell_type": "code",
        "source": ["print(1)", 7],
        "metadata": [secret],
        "outputs": "not a list",
        "execution_count": 1,
    }
    page = page_of(tmp_path, [], metadata, cells=[odd])
    assert secret not in page
    assert feedback.test_cells({"cells": [odd]}) == {}


def code(source, outputs, grade_id=None, cell_id=None):
    meta = {"grade": True, "solution": False, "grade_id": grade_id, "points": 1}
    cell = {"cell_type": "code", "source": source, "execution_count": 1}
    cell |= {"metadata": {"nbgrader": meta} if grade_id else {}, "outputs": outputs}
    return cell | ({"id": cell_id} if cell_id else {})


def notebook(cells):
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def stdout(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


@pytest.mark.parametrize("ids", [True, False], ids=["by cell id", "by position"])
def test_the_page_is_built_from_the_submission_and_the_clean_run(tmp_path, ids):
    """Issue 64's red team showed an output early with a display_id and rewrote it after the
    hidden tests ran in nbgrader's kernel (a pre_run_cell hook wrote their source into it):
    no output of that run reaches the page now. A cell of the student's shows what they
    submitted; a test cell, visible or hidden, what the clean run's test printed and its
    error; the hidden source, never."""
    secret = "assert run.ranks[0]['held'] <= BOUND  # a hidden test's source"
    kernel = {
        "mine": [display({"text/plain": secret}, display_id="x")],  # updated later
        "test_visible": [stdout("forged: all passed")],
        "test_hidden": [stdout(secret)],
    }
    sources = {
        "mine": "show()",
        "test_visible": "check()",
        "test_hidden": f"### BEGIN HIDDEN TESTS\n{secret}\n### END HIDDEN TESTS",
    }

    def cells(outputs):
        made = [code(sources["mine"], outputs["mine"], None, "c1" if ids else None)]
        for gid in ("test_visible", "test_hidden"):
            made.append(code(sources[gid], outputs[gid], gid, gid if ids else None))
        return made

    autograded = tmp_path / "autograded.ipynb"
    autograded.write_text(json.dumps(notebook(cells(kernel))))
    submitted = tmp_path / "submitted.ipynb"
    theirs = {"mine": [stdout("my own output")], "test_visible": [], "test_hidden": []}
    order = cells(theirs)
    if ids:  # the same cells, moved: matched by id
        order = [order[1], order[0], order[2]]
    submitted.write_text(json.dumps(notebook(order)))
    clean = {
        "test_visible": {"error": None, "output": "a ring sends 288000 bytes\n"},
        "test_hidden": {
            "error": "AssertionError: rank 0 held 9",
            "message": "AssertionError: rank 0 held 9,000 bytes, 1,000 over",
            "output": "rank 0, step 0: held 9,000\n",
        },
    }
    feedback.scrub(autograded, clean, submitted=submitted)
    page = autograded.read_text()
    assert secret not in page and "forged" not in page and "my own output" in page
    for said in (
        "a ring sends 288000",
        "held 9,000 bytes, 1,000 over",
        "rank 0, step 0",
    ):
        assert said in page, said
