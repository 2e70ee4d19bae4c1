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
    course_map     the intro's map: each chapter and the lab that builds its idea (from _toc.yml)
    buckets        gradient buckets in flight against backward (a DDP run's timeline)
    zeropp_diagrams  hpZ's two partitions and qgZ's two hops, from the course's placement
    zeropp_tables  the ZeRO++ chapter's tables: a metered run's collectives, published runs
    zeropp_pays    where qwZ pays: each GPU's ring rate against qwZ's break-even
    fsdp2_diagrams FSDP2's units and gathers, meta then materialised bytes, HSDP's mesh
    desync         a desync hang: each rank's collectives in order, the flight recorder across ranks
    nccl           an all-reduce's bus bandwidth against size for each NCCL algorithm and protocol
    t_star         T*, the tokens per GPU per step that hide ZeRO-3's traffic
    fits_sensitivity  which stage fits as the allocator's margin and the logits' bytes vary
    critical_batch the least global batch that hides ZeRO-3's traffic against published batches
    validation     the performance model's predictions against published measurements
    paper_tables   the ZeRO paper's Table 1 against the calculator
    run_tables     tables of what the later chapters' runs measured (prefetch, recompute, offload)

Old names still work (zerobook/_moved.py): zerobook.plots is charts, zerobook.diagrams is
diagrams, zerobook.widgets is widgets, zerobook.gpu_plots is gpu, zerobook.capstone_plots is
capstone.
"""

from zerobook._lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
