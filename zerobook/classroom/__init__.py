"""The classroom: releasing the labs and grading a class, in one room.

    python -m zerobook.classroom release | grade | book | student-branch   (__main__)

release       the student versions (nbgrader), with the files that tell assistants to tutor
grade         every submission: autograded in a sandbox, scored by a clean run, bounded
clean_score   the clean run: the course's tests against a submission, in a process of its own
function_server  the functions a notebook defines, run sandboxed for the clean run
unseen        the course's implementation of what a lab grades, hidden from its sandboxes
review        flags for the instructor: what no solution needs, read from the cells (not run)
sandbox       bubblewrap around a student's kernel and ranks; RankSandbox for zb.torchrun
limits        what one submission may use together (processes, memory, disk), and job uids
watchdog      kills a submission that passes its bounds, recording why
feedback      what the student and the instructor read afterwards
nbgrader_app  one nbgrader command on the course
student_branch  the student versions as a branch of their own, for the lab pages' launch buttons
tutor_files   AGENTS.md and the names other coding assistants read

Arrows go one way: the classroom calls the launcher (zerobook.grading, zerobook.launcher.launch),
which starts the rank side (zerobook.launcher.rank_entry, zerobook.labs); nothing there imports
the classroom. A lab notebook needs only zerobook.grading.
"""
