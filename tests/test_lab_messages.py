"""The tests' own words reach the student (issue 67): the feedback page shows what a test
cell printed and its error (zerobook.classroom.feedback.verdict), so every `assert` in a lab's
test cells, visible or hidden, carries a message in words (a string built from the run); a
bare one would read `AssertionError:`, and one whose message is a value (`, rank`,
`, report`) a number or a raw dict, naming nothing."""

import ast
import json

import pytest

from conftest import ROOT

LABS = sorted(p.parent.name for p in ROOT.glob("labs/*/*.ipynb"))


def in_words(message) -> bool:
    """Whether an assert's message is built as a string: a literal, an f-string, a
    concatenation or a call ("\\n".join(found))."""
    if isinstance(message, ast.Constant):
        return isinstance(message.value, str)
    return isinstance(message, (ast.JoinedStr, ast.BinOp, ast.Call))


def bare_asserts(notebook: dict) -> list[str]:
    """'grade_id line N: the assert' for each assert of a test cell without a message in
    words: none, or a value (a name, an item, an attribute) rather than a string."""
    bare = []
    for cell in notebook["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            if isinstance(node, ast.Assert) and not in_words(node.msg):
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
        "source": ["x = 1\nassert x == 1, 'said'\nassert x == 2\nassert x, x\n"],
    }
    found = bare_asserts({"cells": [cell]})
    assert found == ["t line 3: assert x == 2", "t line 4: assert x, x"]
