"""The classroom: releasing the labs and grading a class, in one room.

    python -m zerobook.classroom release | grade | book | student-branch   (__main__)

release       the student versions (nbgrader), with the files that tell assistants to tutor
grade         every submission: autograded in a sandbox, scored by a clean run, bounded
submissions   what was submitted, what can be graded, what changed since (grading_state.json)
clean_run     a notebook scored clean, in a fresh process; the limits the reference's run sets
clean_score   that process: the course's tests against a submission's answers
function_server  the functions a notebook defines, run sandboxed for the clean run
review        flags for the instructor: what no solution needs, read from the cells (not run)
sandbox       bubblewrap around a submission's ranks and functions; RankSandbox for zb.torchrun
sandbox_contents  what a sandbox holds: the folders bound in, the variables that pass
limits        what one submission may use together (processes, memory, disk), and job uids
watchdog      kills a submission that passes its bounds, recording why
feedback      what the student and the instructor read afterwards
nbgrader_app  one nbgrader command on the course
nbgrader_fork   the commands forked from one process that imported nbgrader (Linux, macOS)
student_branch  the student versions as a branch of their own, for the lab pages' launch buttons
tutor_files   AGENTS.md and the names other coding assistants read

Arrows go one way: the classroom calls the launcher (zerobook.grading, zerobook.launcher.launch),
which starts the rank side (zerobook.launcher.rank_entry, zerobook.labs); nothing there imports
the classroom. A lab notebook needs only zerobook.grading.
"""
