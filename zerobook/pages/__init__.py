"""pages: what a chapter's page uses besides its figures — the numbers it states and the
measurements it shows. Notebook side.

    answers     an exercise's computed answer, folded in JupyterLab, removed from the book
    glue        a value a chapter computed, kept for the book's {glue} references
    saved       the course's saved measurements (benchmarks/results/), found from any folder
    source      the course's own code excerpted as a highlighted block, read when the cell runs
    gpu_record  the newest `make gpu-check` record from a GPU host, with its device and date
    gpu_findings  the memory chapter's GPU sentences (fragmentation, a bf16 matmul)
    fp8_record  FP8's measurements in the newest GPU record
    reading     reading time and lab sizes, measured from the course's files ("How to use")
    zero_pays, zero_pays_further, nccl_collectives, perfmodel_checks
                the tables of the performance model's pages and its appendix

Old names still work (zerobook/_moved.py): zerobook.glue, zerobook.answers, zerobook.saved and
zerobook.gpu_record are these modules.
"""

from zerobook._lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
