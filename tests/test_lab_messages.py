"""The tests' own words reach the student (issue 67): the feedback page shows what a test
cell printed and its error (zerobook.classroom.feedback.verdict), so every `assert` in a lab's
test cells, visible or hidden, carries a message; a bare one would read `AssertionError:` and
name nothing."""

import ast
import json

import pytest

from conftest import ROOT

LABS = sorted(p.parent.name for p in ROOT.glob("labs/*/*.ipynb"))


def bare_asserts(notebook: dict) -> list[str]:
    """'grade_id line N: the assert' for each assert without a message in a test cell."""
    bare = []
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            if isinstance(node, ast.Assert) and node.msg is None:
                bare.append(
                    f"{meta['grade_id']} line {node.lineno}: {ast.unparse(node)}"
                )
    return bare


@pytest.mark.parametrize("lab", LABS)
def test_every_assert_of_a_test_cell_says_what_is_wrong(lab):
    notebook = json.loads((ROOT / "labs" / lab / f"{lab}.ipynb").read_text())
    assert not bare_asserts(notebook), bare_asserts(notebook)


def test_a_bare_assert_is_found():
    cell = {
        "cell_type": "code",
        "metadata": {"nbgrader": {"grade": True, "grade_id": "t"}},
        "source": ["x = 1\nassert x == 1, 'said'\nassert x == 2\n"],
    }
    assert bare_asserts({"cells": [cell]}) == ["t line 3: assert x == 2"]
