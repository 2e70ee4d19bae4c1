"""launcher: how a cell starts real processes and gets their results back — torchrun, its agent,
each rank, what a rank reports and how a run that failed is told. The notebook's side launches;
the rank's side (dist, rank_entry, rank_records, lifeline, lifetime) runs in every rank.

    launch         zb.torchrun: start N ranks, stream their output tagged, return what each reported
    command        torchrun's command line (its main in this interpreter) and the ranks' environment
    supervisor     one run: its agent started, its output streamed, every process stopped at the end
    start_method   fork the ranks from a preloaded agent (Linux) or start each fresh (elsewhere)
    zygote         the process that imported torch once, from which each launch forks its agent
    zygote_main    the zygote itself, started by path (nothing of the launcher loaded)
    agent          what torchrun's agent runs first: the preload, torchrun's method name mended
    rank_entry     what each rank runs: the target, its failure recorded, its stack on demand
    rank_fresh     the watcher of a rank started fresh (the non-Linux path)
    dist           a rank's face: zb.setup (gloo or NCCL, the device) and zb.report (JSON back)
    rank_records   what a failed rank leaves for the launcher: its exception, or the signal
    rank_output    torchrun's combined output split by rank
    failures       how a run failed, in words: the rank that failed first, and why (LaunchError)
    nccl_log       NCCL_DEBUG=INFO read: the network, each channel's link, ranks that never started
    run_processes  a run's processes found, asked where they are, stopped
    lifetime       Linux's parent-death signal: no process outlives the one that started it
    lifeline       the same on every platform, by polling the parent
    cluster        beyond one machine: each node's torchrun command, SLURM scripts, a
                   multi-node job with every node on this machine

Old names still work (zerobook/_moved.py): zerobook.launch, zerobook.dist, zerobook.rank_entry
(`python -m zerobook.rank_entry`) and the rest are these modules.
"""

from zerobook._lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
