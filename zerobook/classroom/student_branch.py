"""The labs' student versions on a branch of their own, where the lab pages' launch buttons open
them.

The repository's main branch holds the instructor notebooks (solutions, hidden tests); the book's
lab pages show the student versions, written at build time into book/labs/ (git-ignored). A
launch button (Colab, JupyterHub) opens a notebook from a branch of the repository, so the pages
workflow (.github/workflows/pages.yml) commits those files, at the same paths, as the one commit
of STUDENT_BRANCH and force-pushes it; book/_ext/repository_buttons.py points the lab pages'
launch buttons at that branch (a chapter's still open main).

    python -m zerobook.classroom student-branch   # book/labs/*.ipynb -> branch student-labs
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

STUDENT_BRANCH = "student-labs"
README = """\
# The labs' student versions

Written by the course's pages workflow from the main branch ({source}): do not edit them here.
Each lab page of the book opens its notebook from this branch (Colab, JupyterHub); the course
itself, and how to run it, is on the main branch.
"""
# who commits: the workflow's bot, whatever git's config says (environment variables win over
# it); GIT_AUTHOR_* set in the environment win over these
IDENTITY = {
    "GIT_AUTHOR_NAME": "github-actions[bot]",
    "GIT_AUTHOR_EMAIL": "41898282+github-actions[bot]@users.noreply.github.com",
}


def commit_student_versions(repo: Path, files: list[Path]) -> str:
    """Make branch STUDENT_BRANCH of the git repository `repo` one commit, with no parent, that
    holds `files` (paths inside `repo`, kept at those paths) and a README, nothing else; return
    its hash. The work tree, the index and the current branch are left as they were."""
    repo = repo.resolve()
    paths = [str(Path(f).resolve().relative_to(repo)) for f in files]
    if not paths:
        raise ValueError(
            "no student versions to publish: write them first (python -m zerobook.classroom book)"
        )
    with tempfile.TemporaryDirectory() as scratch:
        env = {**IDENTITY, **os.environ, "GIT_INDEX_FILE": f"{scratch}/index"}
        env.setdefault("GIT_COMMITTER_NAME", env["GIT_AUTHOR_NAME"])
        env.setdefault("GIT_COMMITTER_EMAIL", env["GIT_AUTHOR_EMAIL"])

        def git(*args: str, given: str | None = None) -> str:
            done = subprocess.run(
                ["git", "-C", str(repo), *args],
                env=env,
                input=given,
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
            return done.stdout.strip()

        source = git("rev-parse", "--short", "HEAD")
        git("add", "--force", "--", *paths)  # book/labs/ is git-ignored on main
        readme = git("hash-object", "-w", "--stdin", given=README.format(source=source))
        git("update-index", "--add", "--cacheinfo", f"100644,{readme},README.md")
        tree = git("write-tree")
        message = f"The labs' student versions, from {source}"
        commit = git("commit-tree", tree, "-m", message)
        git("update-ref", f"refs/heads/{STUDENT_BRANCH}", commit)
    return commit
