"""labs: everything that grades the labs — each lab's trusted harness (named as the lab's folder
in labs/), the record its run keeps, and the checks its tests read. Rank side (but
capstone_checks, which only the notebook's tests read).

Each harness imports the student's file (`harness.load_student`), runs it on every rank inside
the course's own code through public hook points only, and reports what it measured; the
notebook's tests grade those reports.

    setup_check      Lab 0: one part of the student's rank script on every rank
    memory           Lab 1: the student's byte counter against zerobook.train.measure
    ddp              Lab 2: the student's bucketed DDP, its events recorded
      bucket_events    the buckets a step should send, read from its events (the tests' checks)
    ring_allreduce   Lab 3: the student's ring against dist.all_reduce, its bytes counted
      ring_chunks      what a wrong ring left in each chunk, after which phase
      ring_held        sends and receives held until waited on: a missing wait() named
    zero             Lab 4: the student's ZeRO-2, its reduce-scatters and held gradients
      zero_probe       what the harness reads off the student's ZeRO-2 on a rank
      zero_events      the step read from its events: layout, state, buckets, overlap, traffic
      zero_held        the gradient bytes a rank holds, and when each bucket was retired
    zero3            Lab 5: the student's ZeRO-3, every collective named by its unit
      zero3_record     the run's record on each rank: which unit each collective carried,
                       what the student's object holds between steps
      zero3_events     the checks: parity, kept, peak, traffic, forward and backward prefetch
      freed            freed storage caught before torch reads it: a named error, no SIGSEGV
    fsdp2            Lab 6: the student's FSDP2 set-up: precision, prefetch, checkpoints
      checkpoint_readback  the checkpoint read by a fresh process; a copy with other values
    capstone         Lab 7: the student's DDP and ZeRO-3 train a GPT beside FSDP2
      capstone_checks  curves, clipping, bytes kept, the target, the resume
      capstone_resume  killed and resumed from sharded checkpoints
    bug_zoo          Lab 8: the student's repaired training loops against a correct one
      bug_zoo_story    the ways ddp_step may take the mean; overflows and starting weights
    zeropp           Lab 9: the student's qwZ and hpZ: quantizer, quantized gather, node, pieces
      zeropp_checks  the checks: bounds from the block size, bytes and groups per collective

What every harness shares: harness (import the student's file under its lab's rules,
zerobook.trust.policy, and call into it safely), crash (what a run established before it failed), hints (what an error most likely means), means, student_state,
weights_used.

The experiments that chapters and benchmarks launch live in `zerobook.runs`; what both need
lives in library modules (`zerobook.train`, `zerobook.fsdp2`).
Old names still work (zerobook/_moved.py): zerobook.zero3_events, zerobook.freed, ... are these
modules.
"""

from zerobook._lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
