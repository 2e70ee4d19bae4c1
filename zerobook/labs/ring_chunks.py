"""Lab 3: what a wrong ring left in a rank's tensor, chunk by chunk, and after which phase.

Every rank's input is made from a seed the harness knows (`case_inputs`), so each rank can
say what any chunk of its result holds: which ranks' values it adds up ("ranks 0, 3 (2 of
the 4 ranks' values)"), NaN (a receive read before its wait()), or values that are no such
sum (a chunk added into another chunk's place). `verdict` says it for the phase that went
wrong: the state after the first N - 1 receives (the reduce-scatter, after which a rank
holds the full sum of one chunk), else the result after the all-gather.
"""

from __future__ import annotations

import itertools

import torch


PASS_ON = (
    ": the all-gather passes on finished chunks only, each received into its place (rank r "
    "starts with chunk (r + 1) mod N, the one its reduce-scatter completed)"
)


ON_PAPER = (
    ": work out on paper, for N = 4, which chunk rank r sends and which it receives and "
    "adds at step s"
)


def case_inputs(size: int, dtype: torch.dtype, world_size: int) -> list[torch.Tensor]:
    """Every rank's tensor for one case (small integers: any order of addition is exact)."""
    inputs = []
    for rank in range(world_size):
        torch.manual_seed(size * 31 + rank)
        inputs.append(torch.randint(-100, 100, (size,)).to(dtype))
    return inputs


def ranks_said(ranks) -> str:
    ranks = list(ranks)
    return f"rank{'s' * (len(ranks) > 1)} {', '.join(map(str, ranks))}"


def holds(chunk: torch.Tensor, pieces: list[torch.Tensor]) -> str:
    """What `chunk` holds, given every rank's own values of the same chunk (`pieces`)."""
    n = len(pieces)
    if torch.isnan(chunk).any():
        return "NaN (a received chunk read before its wait() returned)"
    counts = sorted(
        itertools.product((0, 1, 2), repeat=n), key=lambda c: (max(c), -sum(c))
    )
    for count in counts:
        if torch.equal(
            chunk, sum((k * p for k, p in zip(count, pieces)), 0 * pieces[0])
        ):
            once = [r for r in range(n) if count[r]]
            twice = [r for r in range(n) if count[r] == 2]
            if not once:
                return "zeros, no rank's values"
            said = (
                f"{ranks_said(once)}'s own values only"
                if len(once) == 1
                else f"the sum of {ranks_said(once)} ({len(once)} of the {n} ranks' values)"
            )
            return said + (f", {ranks_said(twice)}'s added twice" if twice else "")
    return (
        "values that are no sum of the ranks' values of this chunk: a received chunk was "
        "added into (or received into) another chunk's place"
    )


def verdict(
    result: torch.Tensor,
    after_reduce_scatter: torch.Tensor | None,
    inputs: list[torch.Tensor],
    rank: int,
    received: int,
) -> str:
    """Which chunk of rank `rank`'s tensor is wrong, after which phase, and what it holds.
    `after_reduce_scatter`: the tensor as the rank made its N-th receive (None: it made
    fewer, and its result is all there is); `received`: the receives it made."""
    n = len(inputs)
    total, result = sum(inputs), result.cpu()
    said = []
    if received != 2 * (n - 1):
        said.append(
            f"your ring made {received} receive(s) on rank {rank}; a ring makes 2(N - 1) = "
            f"{2 * (n - 1)}, N - 1 in its reduce-scatter and N - 1 in its all-gather"
        )
    if not received:
        said.append(
            "every rank's values must reach every other rank, passed on by its neighbours: "
            "send and receive a chunk in each step"
        )
        return "; ".join(said)
    split = [torch.tensor_split(t, n) for t in (total, *inputs)]
    sums, own = split[0], list(zip(*split[1:]))  # own[c]: each rank's chunk c
    state = result if after_reduce_scatter is None else after_reduce_scatter.cpu()
    chunks = torch.tensor_split(state, n)
    if not any(c.numel() and torch.equal(c, s) for c, s in zip(chunks, sums)):
        c = (rank + 1) % n
        held = holds(chunks[c], list(own[c]))
        said.append(
            f"after its reduce-scatter (the first N - 1 = {n - 1} steps) rank {rank} "
            f"holds the full sum of no chunk: chunk {c} (the one a ring's rank {rank} "
            f"completes) holds {held}" + ON_PAPER * ("NaN" not in held)
        )
        return "; ".join(said)
    chunks = torch.tensor_split(result, n)
    c = next(c for c in range(n) if not torch.equal(chunks[c], sums[c]))
    held = holds(chunks[c], list(own[c]))
    said.append(
        f"after the all-gather, chunk {c} ({chunks[c].numel()} elements) of rank {rank} holds "
        f"{held}, not the sum of all {n} ranks' values"
        + PASS_ON
        * ("values only" in held or "ranks' values)" in held)
    )
    return "; ".join(said)
