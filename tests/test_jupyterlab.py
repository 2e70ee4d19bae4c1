"""The chapters as a student meets them in JupyterLab (jupyterlab-myst renders their MyST), and the
student's and the instructor's environments (nbgrader's instructor UI off, then on).

The static checks run in `make test`; the ones that start JupyterLab (about 10 CPU s each, and a
chapter run) are `slow` (make test-grading, CI).
"""

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from tests import browser
from tests.conftest import ROOT, processes_running

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
CHAPTER = "memory_accounting"  # short to run (one launch), and every construct: cite, term, glue
JUPYTER = Path(sys.executable).parent / "jupyter"
SHOTS = ROOT / "_build" / "screenshots" / "jupyterlab"
# Roles whose target jupyterlab-myst cannot resolve (another page, a figure of the book): without
# an explicit text it shows the bare label, so each must say what it points to.
BARE_ROLE = re.compile(r"\{(ref|doc|numref)\}`[^`<]*`")


def markdown_cells(path):
    return [c for c in nbformat.read(path, 4).cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_answer_cells_are_collapsed_in_jupyterlab(path):
    """A cell that computes answers is removed from the book and its source collapsed in
    JupyterLab (jupyter.source_hidden), so the exercises are not spoiled in either; it gives its
    answers with zerobook.pages.answers.answer, which folds each value for JupyterLab (where the
    dropdown's {glue:text} shows only the name). The one other removed cell is the last code
    cell's `scratch.cleanup()`, which removes the chapter's scratch folder."""
    for cell in nbformat.read(path, 4).cells:
        if "remove-cell" in cell.metadata.get("tags", []):
            assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, (
                cell.source[:80]
            )
            if re.fullmatch(r"scratch\.cleanup\(\)(  #.*)?", cell.source.strip()):
                continue
            assert "answer(" in cell.source and not re.search(
                r"(?<![\w.])glue\(", cell.source
            ), cell.source[:80]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_cross_references_name_their_target(path):
    for cell in markdown_cells(path):
        assert not BARE_ROLE.findall(cell.source), BARE_ROLE.search(cell.source).group(
            0
        )
        assert "{numref}" not in cell.source, (
            "jupyterlab-myst shows {numref}'s %s as it is"
        )


def glue_keys_in_prose(path) -> set[str]:
    """The glued names the chapter's prose states, outside the answers' dropdowns."""
    keys = set()
    for cell in markdown_cells(path):
        for block in re.split(r"\n(?=:::)", cell.source):
            if ":class: dropdown" not in block:
                keys |= set(re.findall(r"\{glue(?::text)?\}`([^`:]+)", block))
    return keys


# ---------------------------------------------------------------- the environments (slow) ----


def enabled_extensions() -> dict[str, bool]:
    """What `jupyter labextension list` and `jupyter server extension list` say of nbgrader's."""
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(ROOT / "_build" / "no-user-config"))
    said = {}
    for command in (["labextension", "list"], ["server", "extension", "list"]):
        out = subprocess.run(
            [str(JUPYTER), *command], env=env, capture_output=True, text=True
        )
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
        for name, state in re.findall(
            r"^\s*(\S*nbgrader\S*) (?:v\S+ )?(enabled|disabled)", text, re.M
        ):
            said[name] = state == "enabled"
    return said


def make(target: str):
    done = subprocess.run(
        ["make", "-s", target], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@contextlib.contextmanager
def venv_ui_lock():
    """Held while a test switches the venv's nbgrader UI or reads a JupyterLab of that venv:
    the two never overlap, whichever workers run them."""
    with open(ROOT / ".venv" / ".nbgrader-ui.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.mark.slow
@pytest.mark.xdist_group("jupyterlab")
def test_student_and_instructor_environments():
    """`make install` leaves nbgrader's JupyterLab UI off; `make instructor` turns it on; `make
    install` turns it off again. Listed as Jupyter lists them, one by one."""
    names = ["@jupyter/nbgrader"] + [
        f"nbgrader.server_extensions.{e}"
        for e in ("formgrader", "validate_assignment", "assignment_list", "course_list")
    ]
    with venv_ui_lock():
        switch_and_restore(names)


def switch_and_restore(names: list[str]) -> None:
    instructor = (ROOT / ".venv" / ".instructor").exists()
    try:
        make("install")
        assert enabled_extensions() == dict.fromkeys(names, False)
        make("instructor")
        assert enabled_extensions() == dict.fromkeys(names, True)
    finally:
        make("instructor" if instructor else "install")


# ---------------------------------------------------------------- a real JupyterLab (slow) ----


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_settings(settings: Path):
    """No news pop-up over the page; no autosave (the chapter is a copy anyway)."""
    for plugin, values in {
        "apputils-extension/notification": {"fetchNews": "false"},
        "docmanager-extension/plugin": {"autosave": False},
    }.items():
        path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(values))


def wait_listening(lab, port: int, log: Path, seconds: float = 180):
    """Until the server accepts connections (its start costs ~10 CPU s: long on a busy machine)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert lab.poll() is None, log.read_text()[-3000:]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(
        f"JupyterLab did not listen within {seconds} s:\n" + log.read_text()[-3000:]
    )


@pytest.fixture
def jupyterlab(tmp_path):
    """`jupyter lab` from this venv (the student's environment) on a free port with a token, its
    root a folder holding a copy of the chapter; yields the chapter's URL."""
    browser.chromium(), shutil.which("chromedriver") or browser.missing("chromedriver")
    (tmp_path / "chapters").mkdir()
    shutil.copy(ROOT / "chapters" / f"{CHAPTER}.ipynb", tmp_path / "chapters")
    write_settings(tmp_path / "settings")
    port, token = free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
    )
    log = open(tmp_path / "lab.log", "w")
    lock = venv_ui_lock()
    lock.__enter__()  # until the test is done: no one switches the UI meanwhile
    lab = subprocess.Popen(
        [
            str(JUPYTER),
            "lab",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={tmp_path}",
            "--LabApp.expose_app_in_browser=True",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_listening(lab, port, tmp_path / "lab.log")
        yield f"http://127.0.0.1:{port}/lab/tree/chapters/{CHAPTER}.ipynb?token={token}"
    finally:
        lab.terminate()
        lab.wait(60)
        log.close()
        lock.__exit__(None, None, None)
    assert not processes_running(str(tmp_path)), "a kernel outlived JupyterLab"


def run_all(b, wait):
    """Run > Run All Cells, as a student would; wait until every code cell has run."""
    from selenium.webdriver.common.by import By

    b.find_element(
        By.XPATH, "//li[contains(@class,'lm-MenuBar-item')][.//div[text()='Run']]"
    ).click()
    item = "//li[contains(@class,'lm-Menu-item')][.//div[text()='Run All Cells']]"
    wait(
        30, lambda d: [e for e in d.find_elements(By.XPATH, item) if e.is_displayed()]
    )[0].click()

    wait(300, lambda d: d.execute_script(RAN))
    assert not b.execute_script(ERRORS)


NOTEBOOK = (  # the main area's notebook: JupyterLab 4.6's currentWidget is null until focused
    "const notebook = [...window.jupyterapp.shell.widgets('main')]"
    ".find(w => w.sessionContext);\n"
)
CODE_CELLS = (
    NOTEBOOK
    + "const code = [...notebook.content.model.cells].filter(c => c.type === 'code');\n"
)
KERNEL_IDLE = (
    NOTEBOOK
    + """const session = notebook && notebook.sessionContext.session;
return !!(session && session.kernel) && session.kernel.status === 'idle';"""
)  # asked of the app: JupyterLab 4.6's status bar no longer says "Idle"
RAN = (
    CODE_CELLS
    + """return notebook.sessionContext.session.kernel.status === 'idle'
  && code.every(c => c.executionCount !== null);"""
)
ERRORS = (
    CODE_CELLS
    + """return code.flatMap(c => c.outputs.toJSON())
  .filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue);"""
)


GLUED = (
    CODE_CELLS
    + """const out = {};
for (const cell of code) {
  for (const o of cell.outputs.toJSON()) {
    const name = o.metadata && o.metadata.scrapbook && o.metadata.scrapbook.name;
    if (name) out[name] = o.data['application/papermill.record/text/plain'];
  }
}
return out;"""
)


def shoot(b, name: str, element=None):
    SHOTS.mkdir(parents=True, exist_ok=True)
    if element is not None:
        b.execute_script("arguments[0].scrollIntoView()", element)
        time.sleep(0.5)
    b.save_screenshot(str(SHOTS / f"{name}.png"))


@pytest.mark.slow
@pytest.mark.xdist_group("jupyterlab")
def test_chapter_reads_in_jupyterlab(jupyterlab, tmp_path):
    """Open a chapter in the student's JupyterLab, Run All, and read it as the student does."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    b = browser.driver(tmp_path / "chromium", offline=browser.LOOPBACK_ONLY)
    wait = lambda seconds, until: WebDriverWait(b, seconds, poll_frequency=1).until(
        until
    )
    try:
        b.set_window_size(1400, 1000)
        b.get(jupyterlab)
        wait(
            180,
            lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-MarkdownCell"),
        )
        wait(180, lambda d: d.execute_script(KERNEL_IDLE))
        run_all(b, wait)
        check_prose(b)
        check_answers(b)
        check_glued_numbers(b)
        check_no_instructor_ui(b)
    finally:
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / "page.html").write_text(
            b.page_source
        )  # what the checks read, to look at
        b.quit()


def check_prose(b):
    """No MyST role, directive or target shows as raw text in any rendered markdown cell."""
    from selenium.webdriver.common.by import By

    cells = b.find_elements(
        By.CSS_SELECTOR, ".jp-MarkdownCell .myst"
    )  # jupyterlab-myst's
    assert len(cells) == len(markdown_cells(ROOT / "chapters" / f"{CHAPTER}.ipynb"))
    shoot(b, "chapter-top", cells[0])
    for cell in cells:
        text = cell.get_attribute("textContent")
        for raw in ("{cite", "{term}", "{ref}", "{glue", ":::", "```"):
            assert raw not in text, (raw, text[:300])
        assert not re.search(r"\([\w-]+\)=", text), text[:300]
    prose = " ".join(cell.text for cell in cells)
    assert (
        "an fp32 master copy" in prose
    )  # {term}`master <master weights>`: its text, a link
    assert "Rajbhandari et al., 2020" in prose  # a citation reads as author and year


def check_answers(b):
    """Every answer is a folded dropdown; the cell computing them shows no source."""
    from selenium.webdriver.common.by import By

    answers = b.find_elements(
        By.XPATH,
        "//details[.//summary[contains(., 'Answer')]][not(ancestor::*[contains(@class, 'jp-OutputArea')])]",
    )
    assert len(answers) == 4, len(answers)
    assert not [a for a in answers if a.get_attribute("open")]
    shoot(b, "answers-folded", answers[0])
    collapsed = [
        c
        for c in b.find_elements(By.CSS_SELECTOR, ".jp-CodeCell")
        if c.find_elements(By.CSS_SELECTOR, ".jp-InputPlaceholder")
    ]
    cells = nbformat.read(ROOT / "chapters" / f"{CHAPTER}.ipynb", 4).cells
    checks = [c for c in cells if "hide-input" in c.metadata.get("tags", [])]
    assert checks and len(collapsed) == 1 + len(checks)  # the answers' cell, the checks
    assert all(
        c.find_element(By.CSS_SELECTOR, ".jp-InputPlaceholder").is_displayed()
        for c in collapsed
    )
    hidden = [
        c
        for c in collapsed
        if c.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output details")
    ]  # the cell that computes the answers (zerobook.pages.answers folds each value)
    assert len(hidden) == 1
    assert 'glue("ex1' not in b.find_element(By.CSS_SELECTOR, ".jp-Notebook").text
    shoot(b, "answer-cell-collapsed", hidden[0])
    answers[0].find_element(By.TAG_NAME, "summary").click()
    assert answers[0].get_attribute("open")
    shoot(b, "answer-opened", answers[0])
    values = hidden[0].find_elements(
        By.CSS_SELECTOR, ".jp-OutputArea-output details"
    )  # zerobook.pages.answers
    assert len(values) == 5 and not [v for v in values if v.get_attribute("open")]
    values[0].find_element(
        By.TAG_NAME, "summary"
    ).click()  # the number the first answer names
    replicated = f"{2 * 70e9 / 1e9:.0f}"  # Exercise 1: the 16-bit weights of 70B parameters, in GB
    assert (
        values[0].get_attribute("open")
        and values[0].text.splitlines()[-1].strip() == replicated
    )
    shoot(b, "answer-value-opened", hidden[0])


def check_glued_numbers(b):
    """Each number the prose glues is shown by a visible output of the cell that computed it:
    JupyterLab has no glue (jupyterlab-myst shows the role's name), the outputs carry the value."""
    from selenium.webdriver.common.by import By

    glued = b.execute_script(GLUED)
    shown = "\n".join(
        o.text for o in b.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output")
    )
    keys = glue_keys_in_prose(ROOT / "chapters" / f"{CHAPTER}.ipynb")
    assert keys and keys <= set(glued), keys - set(glued)
    for key in keys:
        value = glued[key].strip("'\"")
        assert value in shown, (key, value)


def check_no_instructor_ui(b):
    """The student's JupyterLab has no Nbgrader menu, Formgrader, Create Assignment or Validate."""
    from selenium.webdriver.common.by import By

    menus = [m.text for m in b.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-itemLabel")]
    # on failure, say how the venv's nbgrader extensions stand now (another test toggles them)
    assert "Run" in menus and "Nbgrader" not in menus, (menus, enabled_extensions())
    page = b.find_element(By.TAG_NAME, "body").text
    for tool in ("Formgrader", "Create Assignment", "Validate"):
        assert tool not in page, tool
    commands = b.execute_script("return window.jupyterapp.commands.listCommands()")
    assert not [
        c for c in commands if "nbgrader" in c.lower() or "formgrader" in c.lower()
    ]
    shoot(b, "student-menus")


def test_an_answer_is_glued_for_the_book_and_folded_for_jupyterlab(monkeypatch):
    import IPython.display
    import myst_nb

    from zerobook.pages.answers import answer

    glued, shown = [], []
    monkeypatch.setattr(myst_nb, "glue", lambda *args, **kw: glued.append((args, kw)))
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj.data))
    answer("ex1_gb", "<16.6>")
    assert glued == [(("ex1_gb", "<16.6>"), {"display": False})]
    assert shown == [
        "<details><summary>&#9656; answer <code>ex1_gb</code> (click to show)</summary>"
        "<code>&lt;16.6&gt;</code></details>"
    ]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_chapter_with_a_scratch_folder_removes_it_in_its_last_code_cell(path):
    """nbval (and a kernel restart in JupyterLab) kills the kernel, so the
    TemporaryDirectory's finalizer never runs: the last code cell removes it."""
    code = [c.source for c in nbformat.read(path, 4).cells if c.cell_type == "code"]
    if any(re.search(r"^scratch = tempfile\.", s, re.M) for s in code):
        assert code[-1].startswith("scratch.cleanup()"), code[-1][:80]
