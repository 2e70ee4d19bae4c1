"""What the capstone grades, read from its runs' reports (zerobook.labs.capstone): each check
returns the problems it found, each naming the rank and step, or [] (notebook side).

    train = run of part "train" (its .ranks), resumed = run of part "resume"
    curve_problems(train.ranks)        your DDP and your ZeRO-3: the same loss, bit for bit
    clip_problems(train.ranks)         the same clipped norm at every step
    kept_problems(train.ranks)         ZeRO-3 keeps 16 Psi / N bytes of model state
    target_problems(train.ranks)       held-out bits per byte below the bigram baseline
    resume_problems(resumed.ranks, train.ranks)   the resumed curve continues the same
"""

from __future__ import annotations

import math


def first_parting(a: list, b: list) -> int | None:
    """The first index where two sequences differ (or one ends early), or None."""
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def curve_problems(reports: list[dict]) -> list[str]:
    """Your ZeRO-3's loss against your DDP's over the first `prefix` steps, every rank."""
    found = []
    for rank, report in enumerate(reports):
        runs, prefix = report["runs"], report["prefix"]
        ddp, zero3 = runs["ddp"]["curve"], runs["zero3"]["curve"][:prefix]
        step = first_parting(ddp, zero3)
        if step is None:
            continue
        said = (
            f"rank {rank}, step {step}: your ZeRO-3's loss {zero3[step]!r} bits/byte, "
            f"your DDP's {ddp[step]!r}; every earlier step equal"
        )
        norms = first_parting(runs["ddp"]["norms"], runs["zero3"]["norms"][:prefix])
        if step and norms is not None and norms < step:
            said += (
                f" (the clipped norms part first, at step {norms}: see the clipping)"
            )
        elif step:
            said += (
                ": the norms agree, so the updates differ - do both average the same "
                "way (sum / N) and decay only the matrices?"
            )
        found.append(said)
    return found[:1] + [f"(and {len(found) - 1} more rank(s))"][: len(found) - 1]


def clip_problems(reports: list[dict]) -> list[str]:
    """The norm your clip_sharded returned against the norm DDP's clipping summed in the
    same order, each step of the prefix; named with the relative difference."""
    for rank, report in enumerate(reports):
        prefix = report["prefix"]
        ddp, zero3 = report["runs"]["ddp"]["norms"], report["runs"]["zero3"]["norms"]
        step = first_parting(ddp, zero3[:prefix])
        if step is None:
            continue
        relative = abs(zero3[step] / ddp[step] - 1) if ddp[step] else math.inf
        hint = (
            "the same number summed in another order: add each piece's (g ** 2).sum() "
            "in model.parameters() order, then all-reduce"
            if relative < 1e-4
            else "not the global norm: every piece of every parameter, on every rank"
        )
        return [
            f"rank {rank}, step {step}: your norm {zero3[step]!r}, DDP's {ddp[step]!r} "
            f"(relative difference {relative:.1e}): {hint}"
        ]
    return []


def expected_kept(report: dict) -> int:
    """16 bytes per element of this rank's pieces (fp32 master, gradient, Adam's two
    moments: 4 + 4 + 8), padded to a multiple of N, and a 4-byte step counter each."""
    n = report["world_size"]
    pieces = sum(-(-numel // n) for numel in report["params"])
    return 16 * pieces + 4 * len(report["params"])


def kept_problems(reports: list[dict]) -> list[str]:
    """After a step, your ZeRO-3 keeps no more than its 16 Psi / N bytes of model state
    (nothing is gathered between steps, so prefetch allows nothing more)."""
    found = []
    for rank, report in enumerate(reports):
        kept, bound = report["runs"]["zero3"]["kept"], expected_kept(report)
        if kept > bound:
            found.append(
                f"rank {rank}: your ZeRO-3 keeps {kept:,} bytes after a step, "
                f"{kept - bound:,} more than 16 Psi/N = {bound:,} (full weights, "
                "gradients or buffers left from the step?)"
            )
    return found


def target_problems(reports: list[dict]) -> list[str]:
    """Your ZeRO-3's held-out bits per byte at the end, below the bigram baseline."""
    report = reports[0]
    bits, bigram = report["runs"]["zero3"]["held_out"], report["baselines"]["2"]
    if bits < bigram:
        return []
    return [
        f"held-out {bits:.3f} bits/byte after {report['steps']} steps, not below the "
        f"bigram baseline {bigram:.3f}: the model learned no more than byte pairs"
    ]


def resume_problems(resumed: list[dict], trained: list[dict]) -> list[str]:
    """The resumed run: started again once, from the last checkpoint committed before the
    kill (the one being written stays .partial), its curve equal to the uninterrupted
    run's from there on."""
    first = resumed[0]
    kill_at, every = first["kill_at"], first["every"]
    if first["attempt"] != 1:
        return [f"the run ended in attempt {first['attempt'] + 1}, not 2"]
    if first["resumed_from"] != kill_at - every:
        return [
            f"resumed from step {first['resumed_from']}, not from the last checkpoint "
            f"committed before the kill ({kill_at - every}): did load_shard read it?"
        ]
    for rank, (report, train) in enumerate(zip(resumed, trained)):
        start, prefix = report["resumed_from"], train["prefix"]
        expected = train["runs"]["zero3"]["curve"][start:prefix]
        step = first_parting(report["curve"], expected)
        if step is not None:
            return [
                f"rank {rank}, step {start + step}: the resumed loss "
                f"{report['curve'][step]!r}, the uninterrupted {expected[step]!r}"
                + not_restored(report.get("not_restored") or {}, start)
            ]
    return []


def listed(names: list[str], pieces: int) -> str:
    """ "every parameter (N)", or how many and the first parameters' names."""
    if len(names) == pieces:
        return f"every parameter ({pieces})"
    first = ", ".join(names[:3]) + ", ..." * (len(names) > 3)
    return f"{len(names)} of the {pieces} parameters ({first})"


def not_restored(missing: dict, start: int) -> str:
    """What load_shard did not restore (zerobook.labs.capstone_resume.restored), said with
    what to do; the generic advice when the harness found both restored."""
    said, pieces = [], missing.get("pieces", 0)
    if missing.get("masters"):
        said.append(
            f"the master pieces of {listed(missing['masters'], pieces)} are not step "
            f"{start}'s: copy the saved pieces into the tensors your optimizer updates, "
            "in place (copy_), not into new names"
        )
    if missing.get("state"):
        whose = listed(missing["state"], pieces)
        said.append(
            f"the optimizer's state ({', '.join(missing['state_keys'])}) of the pieces "
            f"of {whose} is not step {start}'s: save optimizer.state_dict() and load it "
            "with load_state_dict"
        )
    if not said:
        return " (save and load every master piece and the optimizer's state)"
    return ": after your load_shard, " + "; and ".join(said)
