"""What the lab tests share: a lab's solution, a solution with a planted mistake, the rank
script a release hands out, a visible test run on a student file."""

import zerobook as zb


def visible_test(tmp_path, monkeypatch, lab: str, grade_id: str, student: str, **names):
    """Run test cell `grade_id` as the student's release shows it (hidden tests removed), after
    the setup cell (then `names` set in its namespace), on `student` written as the lab's rank
    script: the error it raises, or None."""
    from conftest import ROOT
    from zerobook.classroom.release import student_version

    notebook = student_version(ROOT / "labs", lab)
    cells = {
        c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in notebook.cells
    }
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    exec(cells["setup"], namespace)
    namespace.update(names)
    (tmp_path / namespace["STUDENT_FILE"]).write_text(student)
    try:
        exec(cells[grade_id], namespace)
    except Exception as error:  # noqa: BLE001 - the test cell's failure is what is checked
        return error
    return None


def lab_solution(lab: str) -> str:
    """The rank script of a lab's instructor notebook, as the student's cell writes it."""
    from conftest import ROOT

    return zb.grading.reference_script(ROOT / "labs", lab)


def planted(tmp_path, lab: str, name: str, old: str, new: str, *more: str) -> str:
    """The lab's solution with `old` replaced by `new` (and each further pair in `more`), written
    as a student's file."""
    solution = lab_solution(lab)
    pairs = [(old, new), *zip(more[::2], more[1::2])]
    for a, b in pairs:
        assert solution.count(a) == 1, a
        solution = solution.replace(a, b)
    student = tmp_path / name / f"{lab}_student.py"
    student.parent.mkdir()
    student.write_text(solution)
    return str(student)


def released_rank_script(lab: str) -> str:
    """The rank script of a lab as its student release has it: nbgrader's ClearSolutions applied
    to the instructor notebook (what `make release` runs), without the %%writefile line."""
    import nbformat
    from nbgrader.preprocessors import ClearSolutions

    from conftest import ROOT

    notebook = nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4)
    # labs/nbgrader_config.py's
    stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    released, _ = ClearSolutions(code_stub=stub).preprocess(notebook, {})
    cell = next(
        c
        for c in released.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == "rank_script"
    )
    return cell.source.split("\n", 1)[1]
