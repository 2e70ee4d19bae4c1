"""nbgrader's settings for this course; `python -m zerobook.classroom` runs nbgrader from here.

The instructor notebooks stay where they are (labs/NAME/NAME.ipynb); everything nbgrader makes
(release/, submitted/, autograded/, feedback/, the gradebook) lives in the course directory,
_build/nbgrader unless ZEROBOOK_COURSE_ROOT names another.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get(
    "ZEROBOOK_COURSE_ROOT", os.path.join(HERE, "..", "_build", "nbgrader")
)

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file
c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = HERE
c.CourseDirectory.db_url = f"sqlite:///{os.path.join(ROOT, 'gradebook.db')}"
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "*_student.py",
    "nbgrader_config.py",
    "hidden_params.json",
]  # an instructor's private values
# Each cell may run this long; a cell that runs longer is interrupted, scores 0, and grading
# goes on with the next cell. Launches inside a cell stop themselves sooner (PART_TIMEOUT_S).
c.Execute.timeout = (
    300  # a cell may launch two parts, each stopped after PART_TIMEOUT_S = 60 s
)
c.Execute.interrupt_on_timeout = True
# Once a cell's reply has come, nbgrader waits this long for the rest of its output and, unlike
# nbclient, fails the cell after it (raise_on_iopub_timeout). nbclient's 4 s let a cell that
# printed 50 MB on a loaded 2-core machine end the submission "not graded" (its output still on
# its way): the flood is cut in its feedback (zerobook.classroom.feedback), not by a clock.
c.Execute.iopub_timeout = 60
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
