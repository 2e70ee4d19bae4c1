"""figures: every picture of the book, drawn from real data (matplotlib, in the kernel) or in the
page (HTML and JavaScript). Notebook side: nothing here runs in a rank.

    style          the book's style (sizes a phone can read, SVG), the palette, reference lines, lanes
    charts         the chapters' numbers: memory per GPU against N, redundancy, traffic, bytes held
    ring           the ring all-reduce's steps, measured bandwidth against message size
    diagrams       a flat buffer cut into shards, stage by stage; bytes by kind, stacked
    timelines      a measured step's lanes, gathered bytes over the step, ZeRO-3's units in time
    predictions    the performance model's predicted steps, and one beside a step timed here
    reports        what a run reported: one all-reduce on each rank, a run killed and resumed,
                   each rank's step split into computing and waiting (a straggler)
    widgets        the stage explorer (HTML and JavaScript, or ipywidgets), HTML tables
    step_explorer  the step explorer (zerobook/assets/perfmodel.js, the JavaScript twin of
                   zerobook.perfmodel, predicts in the page)
    gpu            what only a GPU measured (a saved zerobook.pages.gpu_record)
    capstone       the capstone's loss curves and its resumed run

Old names still work (zerobook/_moved.py): zerobook.plots is charts, zerobook.diagrams is
diagrams, zerobook.widgets is widgets, zerobook.gpu_plots is gpu, zerobook.capstone_plots is
capstone.
"""

from zerobook._lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
