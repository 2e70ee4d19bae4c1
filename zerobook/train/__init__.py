"""train: what every training run of the course is made of — the model, the text, the step, the
precision, and how a run is measured and compared. Rank side.

    models              a small GPT-style transformer, counted exactly (GPT, GPTConfig)
    text                real text every Python ships (the standard library's source), byte
                        tokens, each rank's slice of a step's global batch, n-gram baselines
    precision           mixed-precision AdamW as the ZeRO paper counts it: 2 + 2 + 12 bytes
    training            this rank's batch slice, one training step, flat weights, timed steps
    training_methods    the ways to train the parity run compares (DDP, our stages 1-3 and
                        their variants, ShardedOptimizer, ZeroRedundancyOptimizer)
    measure             bytes of the real tensors a rank holds, saved activations, the peak
                        (LiveBytes), the CUDA allocator, the CPU's AdamW rate
    parity              two trainings compared: the same bits, or a derived bound
    recompute           activation checkpointing and selective recomputation
    sharded_checkpoint  DCP checkpoints of FSDP2 models: each rank its own shards
    capstone_train      the capstone's loop, the same for every method

Old names still work (zerobook/_moved.py): zerobook.models, `from zerobook.models import GPT`,
zerobook.measure, ... are these modules.
"""

from zerobook._lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
