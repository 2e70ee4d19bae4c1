"""The files that tell AI coding assistants, in a released lab, to tutor and never solve: one text
(zerobook/assets/tutor.md) under each name the common assistants read.

    write_tutor_files(release / "zero3")   # AGENTS.md, CLAUDE.md, GEMINI.md, Copilot's, Cursor's
"""

from __future__ import annotations

from pathlib import Path

TUTOR_FILES = (
    "AGENTS.md",
    "CLAUDE.md",
    "GEMINI.md",
    ".github/copilot-instructions.md",
    ".cursor/rules/tutor.mdc",
)  # where the common coding assistants look


def write_tutor_files(folder: Path) -> None:
    """Tell AI coding assistants in a released lab to tutor, never solve: zerobook/assets/tutor.md
    under each name the common assistants read (Cursor's rule with its front matter)."""
    text = (Path(__file__).parents[1] / "assets" / "tutor.md").read_text()
    for name in TUTOR_FILES:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        front = "---\ndescription: A graded lab: tutor, do not solve\nalwaysApply: true\n---\n\n"
        path.write_text((front if name.endswith(".mdc") else "") + text)
