"""trust: what keeps a graded run honest when the student's code runs inside it. Rank side.

    policy        what a graded file may use: an allow-list per lab
    policy_text   the file's text read under those rules, before a line runs
    restricted    the file run under those rules: module views, builtins, its import
    plain_objects objects between ranks as JSON, never a peer's pickle
    graded_rank   what a graded rank may not do: start a process (seccomp), or be read by its
                  peers (undumpable); zerobook.launcher.rank_entry confines it before the lab
    spare         the one process a confined rank may have started: Lab 6's checkpoint reader,
                  forked before the filter, running nothing else
    report_guard  a harness's reports guarded against the student's file in the same process
    witness       a rank's collectives witnessed as they happen by its watcher, a process the
                  rank's code cannot reach; the grader refuses a record that differs
    untrusted     reading and writing where a sandbox can write: regular files only, never
                  through a link, never more than a bound

Old names still work (zerobook/_moved.py): zerobook.graded_rank, zerobook.report_guard,
zerobook.witness and zerobook.untrusted are these modules.
"""

from zerobook._lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
