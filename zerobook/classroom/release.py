"""Student versions of the labs: for students (nbgrader's release) and for the book's Labs part.

python -m zerobook.classroom release [--only LAB ...]   # -> _build/nbgrader/release/LAB/
python -m zerobook.classroom book                       # -> book/labs/LAB.ipynb
"""

from __future__ import annotations

from pathlib import Path

from zerobook.classroom import colab_cell
from zerobook.classroom.nbgrader_app import nbgrader
from zerobook.classroom.tutor_files import write_tutor_files

BOOK_LABS = Path(
    "book/labs"
)  # the book's "Labs" part (git-ignored: `make book` writes it)


def release_lab(labs: Path, root: Path, lab: str) -> str:
    """nbgrader's student version of `lab` in root/release/lab (solutions and hidden tests out),
    starting with the Colab cell (zerobook.classroom.colab_cell), with the files that tell coding
    assistants to tutor; nbgrader's output."""
    import nbformat

    out = nbgrader(labs, root, "generate_assignment", lab, "--force")
    released = root / "release" / lab / f"{lab}.ipynb"
    notebook = nbformat.read(released, as_version=4)
    colab_cell.put_first(notebook, colab_cell.published_repository())
    nbformat.write(notebook, released)
    write_tutor_files(root / "release" / lab)
    return out


def lab_names(labs: Path) -> list[str]:
    """Every lab: a folder of labs/ holding a notebook of the same name."""
    return sorted(p.name for p in labs.iterdir() if (p / f"{p.name}.ipynb").is_file())


def release(labs: Path, root: Path, only=()) -> None:
    """Student versions (every lab, or those in `only`): solutions replaced, hidden tests
    removed, outputs cleared."""
    for lab in lab_names(labs):
        if not only or lab in only:
            print(release_lab(labs, root, lab)[-2_000:], flush=True)
    print(f"released to {root / 'release'}")


def student_version(labs: Path, lab: str):
    """Lab `lab`'s student notebook as `release` makes it, in this process (nbgrader's own
    preprocessors, labs/nbgrader_config.py's settings): solutions replaced by the stub, hidden
    tests and mark schemes removed, outputs cleared, the Colab cell first. Measured on 2 cores: 1.5 s for the six labs
    (mostly importing nbgrader), against 14 s for `release`'s nbgrader run."""
    import nbformat
    from nbgrader.preprocessors import (
        ClearHiddenTests,
        ClearMarkScheme,
        ClearOutput,
        ClearSolutions,
    )
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(labs)).load_config()
    notebook = nbformat.read(Path(labs) / lab / f"{lab}.ipynb", as_version=4)
    for step in (ClearSolutions, ClearHiddenTests, ClearMarkScheme, ClearOutput):
        notebook, _ = step(config=config).preprocess(notebook, {})
    colab_cell.put_first(
        notebook, colab_cell.published_repository()
    )  # as release_lab does
    return notebook


def book_labs(labs: Path, out: Path) -> list[Path]:
    """Every lab's student version as out/NAME.ipynb, for the book's "Labs" part, starting with
    the Colab cell as released, shown as a handout (zerobook.classroom.handout); marked for
    myst-nb not to be executed (its stubs raise)."""
    import nbformat

    from zerobook.classroom.handout import as_handout

    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.ipynb"):  # a lab renamed or removed leaves no page behind
        stale.unlink()
    written = []
    for lab in lab_names(labs):
        notebook = student_version(labs, lab)
        as_handout(notebook)
        notebook.metadata["mystnb"] = {"execution_mode": "off"}
        written.append(out / f"{lab}.ipynb")
        nbformat.write(notebook, written[-1])
    return written
