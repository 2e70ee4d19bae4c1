"""The rule that folds a chapter's check cells (tests/check_cells.py)."""

from check_cells import CHECKED, check_share, fold, is_check_cell, is_folded


def code(source: str, tags=()) -> dict:
    return {
        "cell_type": "code",
        "metadata": {"tags": list(tags)} if tags else {},
        "source": source,
    }


def test_asserts_glue_and_loops_of_them_are_checks_and_teaching_lines_are_not():
    assert check_share("assert x == 1\nglue('a', 1, display=False)\n") == 1.0
    assert check_share("for r in rs:\n    assert r > 0\n") == 1.0
    assert check_share("for r in rs:\n    print(r)\n    assert r > 0\n") == 0.0
    assert check_share("y = f(x)\nprint(y)\nassert y\n") == 1 / 3
    assert check_share("# a comment\n\nassert (\n    y\n)\nprint(y)\n") == 3 / 4
    assert (
        check_share("%%writefile a.py\nassert x\n") == 0.0
    )  # a magic: not parsed, never folded


def test_a_cell_removed_for_another_reason_is_left_alone():
    assert is_check_cell(code("assert x\n"))
    assert not is_check_cell(code("assert x\n", ["remove-cell"]))
    assert not is_check_cell(code("print(x)\n"))


def test_fold_tags_check_cells_and_unfolds_cells_that_became_teaching(tmp_path):
    import json

    path = tmp_path / "n.ipynb"
    cells = [code("assert x\n"), code("print(x)\n", ["hide-input"]), code("print(y)\n")]
    cells[1]["metadata"]["mystnb"] = dict(CHECKED)
    path.write_text(json.dumps({"cells": cells}))
    assert fold(path) == 2
    folded = json.loads(path.read_text())["cells"]
    assert [is_folded(c) for c in folded] == [True, False, False]
    assert folded[1]["metadata"] == {} and fold(path) == 0


def test_a_folded_figure_keeps_its_caption(tmp_path):
    import json

    path = tmp_path / "n.ipynb"
    figure = code("assert x\nplot()\nassert y\n")
    figure["metadata"]["mystnb"] = {"figure": {"caption": "C", "name": "fig-c"}}
    path.write_text(json.dumps({"cells": [figure]}))
    assert fold(path) == 1
    meta = json.loads(path.read_text())["cells"][0]["metadata"]
    assert meta["mystnb"] == {"figure": {"caption": "C", "name": "fig-c"}, **CHECKED}
