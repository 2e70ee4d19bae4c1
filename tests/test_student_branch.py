"""The lab pages' launch buttons open the labs' student versions, which the pages workflow
publishes on a branch of their own (zerobook/classroom/student_branch.py); a chapter's open main.
The menus are built by sphinx-book-theme's own code, then book/_ext/repository_buttons.py."""

import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

from conftest import ROOT
from test_book_parts import WORKFLOW, load_module, workflow_steps
from zerobook.classroom.student_branch import STUDENT_BRANCH, commit_student_versions

REPOSITORY = "https://github.com/someone/zero-from-scratch"
LAB_PAGE = "book/labs/setup_check"
LAUNCHERS = {
    "notebook_interface": "jupyterlab",
    "colab_url": "https://colab.research.google.com",
    "jupyterhub_url": "https://hub.example.edu",
}


def launch_menu(pagename: str) -> dict[str, str]:
    """The launch menu's links on a notebook page of the book published at REPOSITORY."""
    from sphinx_book_theme.header_buttons.launch import add_launch_buttons

    buttons = load_module(ROOT / "book" / "_ext" / "repository_buttons.py")
    options = {
        "repository_url": REPOSITORY,
        "repository_branch": "main",
        "launch_buttons": dict(LAUNCHERS),
    }
    app = SimpleNamespace(
        config={"html_theme_options": options},
        env=SimpleNamespace(
            doc2path=lambda name: str(ROOT / f"{name}.ipynb"),
            metadata={pagename: {"kernelspec": {"name": "python3"}}},
        ),
    )
    org, repo = REPOSITORY.split("/")[-2:]
    context = {
        "pagename": pagename,
        "header_buttons": [{"label": "download-buttons"}],
        "sourcename": f"{pagename}.ipynb",
        "page_source_suffix": ".ipynb",
        "github_url": "https://github.com",
        "github_user": org,
        "github_repo": repo,
    }
    add_launch_buttons(app, pagename, "page.html", context, None)
    buttons.launch_student_versions(app, pagename, "page.html", context, None)
    assert options["repository_branch"] == "main"  # put back for the next page
    assert [b["label"] for b in context["header_buttons"]] == [
        "download-buttons",
        "launch-buttons",
    ]
    return {b["text"]: b["url"] for b in context["header_buttons"][1]["buttons"]}


def test_a_chapter_launches_from_main_and_a_lab_from_the_student_branch():
    chapter, lab = launch_menu("chapters/launching"), launch_menu(LAB_PAGE)
    colab = "https://colab.research.google.com/github/someone/zero-from-scratch/blob"
    assert chapter["Colab"] == f"{colab}/main/chapters/launching.ipynb"
    assert lab["Colab"] == f"{colab}/{STUDENT_BRANCH}/{LAB_PAGE}.ipynb"
    assert "branch=main" in chapter["JupyterHub"]
    from urllib.parse import parse_qs, urlsplit

    hub = {k: v for k, [v] in parse_qs(urlsplit(lab["JupyterHub"]).query).items()}
    folder = (
        f"zero-from-scratch-{STUDENT_BRANCH}"  # not main's folder (nbgitpuller#124)
    )
    assert hub == {
        "repo": REPOSITORY,
        "branch": STUDENT_BRANCH,
        "targetpath": folder,
        "urlpath": f"lab/tree/{folder}/{LAB_PAGE}.ipynb",
    }


def git(repo, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def course(tmp_path):
    """A course's clone after `make book`: main committed, book/labs/ written and git-ignored,
    an `origin` to push to."""
    origin, repo = tmp_path / "origin.git", tmp_path / "course"
    git(tmp_path, "init", "--quiet", "--bare", str(origin))
    git(tmp_path, "init", "--quiet", "--initial-branch=main", str(repo))
    (repo / ".gitignore").write_text("book/labs/\n")
    (repo / "labs").mkdir()
    (repo / "labs" / "solution.ipynb").write_text('{"cells": "the solution"}')
    for who in ("user.name", "user.email"):
        git(repo, "config", who, "Instructor")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "the course")
    git(repo, "remote", "add", "origin", str(origin))
    (repo / "book" / "labs").mkdir(parents=True)
    for lab in ("setup_check", "ddp"):
        (repo / "book" / "labs" / f"{lab}.ipynb").write_text(f'{{"lab": "{lab}"}}')
    return repo


def test_the_student_branch_is_one_commit_of_the_student_versions_at_the_pages_paths(
    course,
):
    before = (
        git(course, "status", "--porcelain", "--ignored"),
        git(course, "rev-parse", "HEAD"),
    )
    files = sorted((course / "book" / "labs").glob("*.ipynb"))
    for _ in range(2):  # published again: replaced, not stacked
        commit_student_versions(course, files)
    branch = f"refs/heads/{STUDENT_BRANCH}"
    assert git(course, "rev-list", "--count", branch) == "1"
    assert set(git(course, "ls-tree", "-r", "--name-only", branch).split()) == {
        "README.md",
        "book/labs/ddp.ipynb",
        "book/labs/setup_check.ipynb",
    }  # no instructor notebook
    # the lab page's Colab link names a file the branch holds
    path = launch_menu(LAB_PAGE)["Colab"].split(f"/blob/{STUDENT_BRANCH}/")[1]
    assert git(course, "show", f"{branch}:{path}") == '{"lab": "setup_check"}'
    assert "from the main branch" in git(course, "show", f"{branch}:README.md")
    # the clone is as it was: same branch, same commit, nothing staged
    assert (
        git(course, "status", "--porcelain", "--ignored"),
        git(course, "rev-parse", "HEAD"),
    ) == before
    assert git(course, "branch", "--show-current") == "main"


def test_nothing_to_publish_is_a_clear_error(course):
    with pytest.raises(ValueError, match="python -m zerobook.classroom book"):
        commit_student_versions(course, [])


def test_the_pages_workflow_pushes_the_branch_the_lab_pages_open(course):
    """Its step, run as the runner would after `make book` (the course's `python` in .venv)."""
    assert yaml.safe_load(WORKFLOW.read_text())["permissions"]["contents"] == "write"
    step = next(s for s in workflow_steps() if "student-branch" in s.get("run", ""))
    (course / ".venv" / "bin").mkdir(parents=True)
    python = course / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    subprocess.run(
        ["bash", "-c", step["run"]], cwd=course, check=True, capture_output=True
    )
    origin = course.parent / "origin.git"
    names = git(origin, "ls-tree", "-r", "--name-only", STUDENT_BRANCH).split()
    assert f"{LAB_PAGE}.ipynb" in names and "labs/solution.ipynb" not in names


def test_the_guide_and_readme_name_the_branch_the_buttons_open():
    for doc in (ROOT / "book" / "how_to_use.md", ROOT / "README.md"):
        assert f"`{STUDENT_BRANCH}`" in doc.read_text(), doc.name
