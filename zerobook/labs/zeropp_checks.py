"""Lab 9's checks, read from one launch of zerobook.labs.zeropp (notebook side).

    found = zeropp_checks.problems(run, "quantizer")   # [] or what is wrong, rank by rank

Each check takes one rank's report and returns its problems, each naming the block, rank,
group or bytes at fault and what to do. The bounds are derived: an element of a block of largest
magnitude m is off by at most half a step, m/254 (fp32 adds a few units of 2^-24 of it), and a
cast to bf16 adds at most half its unit in the last place, 2^-8 of the value (7 stored bits).
"""

from __future__ import annotations

FP32 = 1 + 4 * 127 * 2**-24  # x / scale and code x scale, each rounded in fp32
BF16_ROUNDING = 2**-8 * (1 + 1 / 254)  # of m, the largest a dequantized value can be


def problems(run, check: str, ranks=None) -> list[str]:
    """The problems of CHECKS[check] on the first rank (of `ranks`, default all) that has any,
    each led by the rank; "not checked" where the stage it reads failed on that rank."""
    from zerobook.labs.crash import describe

    stage = STAGE.get(check, check)
    for rank in range(len(run.ranks)) if ranks is None else ranks:
        report = run.ranks[rank]
        failed = report["failed_stages"].get(stage)
        if failed and failed.get("skipped"):
            first = first_failure(run, failed["skipped"])
            found = [f"not checked: not run, because the {failed['skipped']} stage failed "
                     f"before it on some rank, whose peers may still have been waiting in its "
                     f"collective: {describe(first)}"]  # fmt: skip
        elif failed:
            found = [f"not checked ({stage} is needed): {describe(failed)}"]
        else:
            found = CHECKS[check](report)
        if found:
            return [f"rank {rank}: {problem}" for problem in found]
    return []


def first_failure(run, stage: str) -> dict:
    """The failure of `stage` that came first (zerobook.labs.crash.first_failed)."""
    from zerobook.labs.crash import first_failed

    stages = [r["failed_stages"].get(stage) for r in run.ranks]
    return first_failed([f for f in stages if f and "error" in f])


def blocks_of(report) -> int:  # the quantizer's and each shard's, the last one padded
    return -(-report["size"] // report["block"])


def first_over(blocks: list[dict], bound) -> tuple[int, dict] | None:
    """The first block whose error is over bound(its largest magnitude)."""
    for k, b in enumerate(blocks):
        if b["error"] > bound(b["largest"]):
            return k, b
    return None


def said_block(k: int, b: dict, block: int, bound: float) -> str:
    return (
        f"block {k} (elements {k * block} to {(k + 1) * block - 1}, largest magnitude "
        f"{b['largest']:.3g}) is off by {b['error']:.3g}, more than its bound {bound:.3g}"
    )


def why_over(k: int, b: dict, blocks: list[dict], rounding: float = 0.0) -> str:
    """What an error over half a step most likely was (`rounding`: of the largest magnitude,
    what a cast of the result may add): rounding toward zero (up to a whole step), one scale
    for the whole tensor (every block within half the tensor's step), else its own scale."""
    m, whole = b["largest"], max(x["largest"] for x in blocks)
    if b["error"] <= m / 127 * FP32 + m * rounding:
        return (": up to a whole step, as rounding toward zero errs; round to the nearest "
                "integer (torch.round) before the cast to int8")  # fmt: skip
    if m < whole / 4 and all(x["error"] <= whole / 254 * FP32 + x["largest"] * rounding for x in blocks):  # fmt: skip
        return (": every block is off by up to half the step of the whole tensor's largest "
                "magnitude: one scale for the whole tensor; each block has its own scale, "
                "its own largest magnitude over 127")  # fmt: skip
    if m < whole / 4:
        return (": its step is coarser than its own largest value gives, as if another "
                "block's largest value set it; each block has its own scale")  # fmt: skip
    return ": was its scale its own largest magnitude over 127" + (
        ", dequantized in float32 and cast to the shard's dtype once, at the end?"
        if rounding else "?")  # fmt: skip


def check_quantizer(report) -> list[str]:
    """quantize: int8 codes for the padded values, an fp32 scale per block; dequantize: the
    first numel values, each within half a step of its own."""
    q, block, blocks = report["quantizer"], report["block"], blocks_of(report)
    found = []
    if q["codes"].get("dtype") != "int8":
        found.append(f"quantize returned codes of {q['codes']}: int8, one byte an element")  # fmt: skip
    elif q["codes"]["numel"] != blocks * block:
        found.append(f"quantize returned {q['codes']['numel']} codes for {report['size']} "
                     f"values: one per element padded to whole blocks, {blocks * block}")  # fmt: skip
    if q["scales"].get("dtype") != "float32" or q["scales"]["numel"] != blocks:
        one = " (one scale for the whole tensor: each block needs its own)" * q["one_scale"]  # fmt: skip
        found.append(f"quantize returned scales of {q['scales']}{one}: float32, one per "
                     f"block of {block}, {blocks} for {report['size']} values")  # fmt: skip
    if q["bad_scales"]:
        found.append(f"block {q['bad_scales'][0]}'s scale is 0 or not finite: a block of zeros "
                     "needs a scale that is not zero (1, say), or its codes are 0 / 0, NaN, whose "
                     "cast to int8 is undefined")  # fmt: skip
    if q["back"].get("numel") != report["size"] or q["back"].get("dtype") != "float32":
        found.append(f"dequantize(codes, scales, {report['size']}, torch.float32) returned "
                     f"{q['back']}: the first numel values, as dtype")  # fmt: skip
    over = first_over(q["blocks"], lambda m: m / 254 * FP32)
    if over:
        k, b = over
        found.append(said_block(k, b, block, b["largest"] / 254 * FP32)
                     + " (half a step, its largest magnitude / 254)" + why_over(k, b, q["blocks"]))  # fmt: skip
    return found


def check_gather_bytes(report, key: str = "gather") -> list[str]:
    """quantized_all_gather sent, in all-gathers over its group's N ranks alone (every rank
    for "gather", the node for "group_gather"), the N shards' int8 codes and fp32 scales:
    N x blocks x (block + 4) bytes (S, all-gathers' output), nothing else."""
    g, block, blocks, call = report[key], report["block"], blocks_of(report), CALLED[key]  # fmt: skip
    n = len(g["members"])
    want, found = n * blocks * (block + 4), []
    other = sorted({c["op"] for c in g["collectives"]} - {"all_gather_into_tensor"})
    if other:
        found.append(f"{call} called {', '.join(other)}: all-gather the codes and the "
                     "scales (dist.all_gather_into_tensor)")  # fmt: skip
    if g["unseen"]:
        found.append(f"{call} ran {g['unseen']} collective(s) the meter did not see: use "
                     "dist.all_gather_into_tensor")  # fmt: skip
    own = tuple(g["members"]) if n < report["world_size"] else None  # None: every rank
    wide = [c for c in g["collectives"] if (c["ranks"] and tuple(c["ranks"])) != own]
    if wide and own:
        found.append(f"{call} ran an all-gather of {wide[0]['bytes']:,} bytes over "
                     f"{list(wide[0]['ranks'] or ()) or 'every rank'}: every collective of "
                     f"the gather runs over `group` (here ranks {list(own)}), the scales' as "
                     "well as the codes': pass group=group to each")  # fmt: skip
    elif wide:
        found.append(f"{call} ran over ranks {list(wide[0]['ranks'])}: over `group` "
                     "(None here: every rank)")  # fmt: skip
    sent = sum(c["bytes"] for c in g["collectives"])
    if sent != want:
        bf16 = n * report["size"] * 2
        why = (" (its bf16 values, two bytes an element: quantize before you send)"
               if sent >= bf16 else "")  # fmt: skip
        found.append(f"{call} moved {sent:,} bytes{why}; {n} ranks' int8 codes "
                     f"({n} x {blocks} x {block}) and fp32 scales ({n} x {blocks} x 4) are "
                     f"{want:,}")  # fmt: skip
    return found


CALLED = {"gather": "quantized_all_gather(shard, block)",
          "group_gather": "quantized_all_gather(shard, block, group)"}  # fmt: skip


def check_gather_values(report, key: str = "gather") -> list[str]:
    """Every member's piece of the gathered weights within its bound of that member's shard
    (half a step, and the cast to bf16), in the group's rank order; its own dequantized too."""
    g, size, block = report[key], report["size"], report["block"]
    members, call = g["members"], CALLED[key]
    n = len(members)
    if g["full"].get("dtype") != "bfloat16" or g["full"].get("numel") != n * size:
        return [f"{call} returned {g['full']}: the {n} shards of {size} elements of "
                f"{'`group`' if key != 'gather' else 'every rank'}, concatenated, in the "
                "shard's dtype (bfloat16)"]  # fmt: skip
    if not any(b["error"] for piece in g["pieces"] for b in piece):  # needs the idea
        return ["every rank's piece is its shard, bit for bit: nothing was quantized (a "
                "block's values round by up to half a step): send quantize's codes and "
                "scales, and dequantize them"]  # fmt: skip
    bound = lambda m: m / 254 * FP32 + m * BF16_ROUNDING  # noqa: E731
    bad = {r: over for r, p in enumerate(g["pieces"]) if (over := first_over(p, bound))}
    me = g.get("index", report["rank"])  # this rank's place in the group
    if not bad:  # its own piece is dequantized too: every rank holds the same weights
        return [] if any(b["error"] for b in g["pieces"][me]) else [
            "your own piece is your shard, bit for bit, where the others' carry the "
            "quantizer's rounding: dequantize your own codes and scales too, so that every "
            "rank holds the same weights"]  # fmt: skip
    r, (k, b) = next(iter(bad.items()))
    found = f"rank {members[r]}'s piece, {said_block(k, b, block, bound(b['largest']))}"
    mine = [p for p, own in enumerate(g["against_own"]) if not first_over(own, bound)]
    if set(bad) <= set(mine):
        found += (f": it holds your own shard's values (rank {report['rank']}'s); the gathered "
                  "codes hold every rank's shard in rank order: dequantize each rank's part")  # fmt: skip
    elif me not in bad:
        found += (": your own piece is right, the others' are not: dequantize each rank's "
                  "codes with that rank's scales, gathered beside them")  # fmt: skip
    else:
        found += why_over(k, b, g["pieces"][r], BF16_ROUNDING)
    return [found]


def check_node(report) -> list[str]:
    """node_group: the group of this rank's node, its node_size consecutive ranks."""
    got, size = report["node"]["ranks"], report["node_size"]
    start = report["rank"] // size * size
    want = list(range(start, start + size))
    if got is None:
        return [f"node_group returned a {report['node']['type']}: return the "
                "dist.ProcessGroup of this rank's node"]  # fmt: skip
    if got != want:
        return [f"node_group gave rank {report['rank']} the group of ranks {got}; its node "
                f"is ranks {want} ({size} consecutive ranks a node)"]  # fmt: skip
    nodes = report["world_size"] // size
    if report["node"]["made"] != nodes and not report["node"]["local"]:
        return [f"node_group made {report['node']['made']} process group(s); every rank "
                f"makes every node's group ({nodes}), in the same order: torch requires every "
                "process to enter dist.new_group, member or not"]  # fmt: skip
    return []


def check_secondary(report) -> list[str]:
    """secondary_piece: piece i of the full weights for the group's i-th rank, bit for bit,
    holding its own bytes and no more."""
    kept = report["secondary"]["kept"]
    if not kept["equal"]:
        return [f"secondary_piece returned {kept['piece']}, not piece {kept['node_rank']} of "
                f"the full weights: the i-th rank of the group keeps full.view(g, -1)[i]"]  # fmt: skip
    if kept["storage"] > kept["bytes"]:
        return [f"the kept piece holds {kept['storage']:,} bytes of storage for its "
                f"{kept['bytes']:,}: a view keeps all of `full` alive; keep a copy (.clone())"]  # fmt: skip
    return []


def check_backward_gather(report) -> list[str]:
    """secondary_gather (of the node's share the harness keeps): all-gathers over the node's
    ranks alone, the full weights' bytes, the full weights again bit for bit."""
    s, size = report["backward"], report["node_size"]
    start, found = report["rank"] // size * size, []
    node = tuple(range(start, start + size))
    wide = [c for c in s["collectives"] if tuple(c["ranks"] or ()) != node]
    if wide:
        over = wide[0]["ranks"] or "every rank"
        found.append(f"secondary_gather ran {wide[0]['op']} over {over}: backward's gather "
                     f"stays inside the node, ranks {list(node)} (pass `group`)")  # fmt: skip
    sent = sum(c["bytes"] for c in s["collectives"])
    if sent != s["full_bytes"] or s["unseen"]:
        found.append(f"secondary_gather moved {sent:,} bytes in collectives the meter saw "
                     f"({s['unseen']} unseen); one all-gather of the full weights moves "
                     f"{s['full_bytes']:,} (dist.all_gather_into_tensor)")  # fmt: skip
    if not s["equal"]:
        found.append(f"secondary_gather returned {s['full']}, not the full weights: the "
                     "pieces of the group's ranks, in their order in the group")  # fmt: skip
    return found


def check_train(report) -> list[str]:
    """The short training with your gathers in our ZeRO-3's units: its loss within 1% of
    ZeRO-3's own at every step (a margin measured, not a bound: the course's qwZ parts from
    ZeRO-3 by a tenth of it); in step 0, backward's all-gathers over the node, one a block,
    of its full bytes; each block's kept piece its node's share in bytes when forward ended."""
    t, size = report["train"], report["node_size"]
    zero3, yours, found = t["curves"]["ZeRO-3"], t["curves"]["yours"], []
    margin, gaps = 0.01 * min(zero3), [abs(a - b) for a, b in zip(yours, zero3)]
    step = max(range(len(gaps)), key=gaps.__getitem__)
    if yours == zero3:  # needs the idea: quantized weights train a little differently
        found.append("your training's loss is ZeRO-3's at every step, bit for bit: forward's "
                     "weights were gathered unquantized; send quantize's codes and scales")  # fmt: skip
    if gaps[step] > margin:
        why = ("the weights your quantized gather gave forward were further from the shards "
               "than the quantizer's bound" if gaps[0] > margin else "step 0's loss matched "
               "(forward's weights were right), so its gradients came from other weights than "
               "forward's: backward's, from your kept piece and secondary_gather")  # fmt: skip
        found.append(f"your training's loss parted from ZeRO-3's by {gaps[step]:.3f} bits per "
                     f"byte at step {step} ({yours[step]:.3f} against {zero3[step]:.3f}), more "
                     f"than 1% of its loss ({margin:.3f}): {why}")  # fmt: skip
    start = report["rank"] // size * size
    node = f"all_gather_into_tensor over {tuple(range(start, start + size))}"
    blocks = {u: p for u, p in t["padded"].items() if u != "root"}
    sent = t["first"]["yours"]["sent"].get(node, {"calls": 0, "bytes": 0})
    full = sum(p * t["element_size"] for p in blocks.values())
    if sent["calls"] != len(blocks) or sent["bytes"] != full:
        found.append(f"in step 0 backward all-gathered {sent['calls']} time(s), {sent['bytes']:,} "
                     f"bytes, over the node's ranks {list(range(start, start + size))}; its "
                     f"{len(blocks)} blocks each once, from their kept pieces, are {full:,}")  # fmt: skip
    held = t["first"]["yours"]["held"]
    for unit, padded in blocks.items():
        share = padded * t["element_size"] // size
        if held.get(unit) != share:
            found.append(f"when forward ended, {unit}'s kept piece held {held.get(unit, 0):,} "
                         f"bytes; its node's share is {share:,} bytes: {padded:,} padded "
                         f"elements of 2 bytes over {size} ranks")  # fmt: skip
            break
    return found


# the stage each reads
STAGE = {"gather_bytes": "gather", "gather_group": "group_gather"}
CHECKS = {
    "quantizer": check_quantizer,
    "gather_bytes": check_gather_bytes,
    "gather": check_gather_values,
    "gather_group": lambda r: (
        check_gather_bytes(r, "group_gather") or check_gather_values(r, "group_gather")
    ),
    "node": check_node,
    "secondary": check_secondary,
    "backward": check_backward_gather,
    "train": check_train,
}
