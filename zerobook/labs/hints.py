"""What a student's error most likely means, by lab: the sentence a failure's record adds
after the student's line and the error (zerobook.labs.crash). Each reads the error (and
what the run recorded before it) and returns "" when it cannot tell.

    Steps(rank, student_file, hint=hints.zero3(world_size))
"""

from __future__ import annotations

import re

AFTER_BACKWARD = ("finish", "step", "zero_grad", "retire", "wait")
HOOK = (
    "register the hook with param.register_post_accumulate_grad_hook(hook), which calls "
    "hook(param) once param.grad holds this backward's gradient (param.register_hook "
    "calls its hook with the gradient, before param.grad is set)"
)


def common(exc: Exception, world_size: int, where: dict | None = None) -> str:
    """The mistakes every lab's students make: a hook given the gradient, pieces of
    different sizes on different ranks, a handle that is None. `where`: the student's
    frame the error came from (its function tells a hook from finish())."""
    said = str(exc)
    function = (where or {}).get("function", "")
    if "'NoneType' object has no attribute 'wait'" in said:
        return (
            "a handle your code waits on is None (a collective returns its handle only "
            "with async_op=True; a gather must return it)"
        )
    if "'NoneType' object has no attribute" in said and function in AFTER_BACKWARD:
        return (
            f"something your code read in {function}() was None: if it was a param.grad, "
            "a parameter of an earlier step was still in your lists (zero_grad() set its "
            "gradient to None): forget a step's buckets and handles once they are used"
        )
    if "'NoneType' object has no attribute" in said:
        return f"something your code read was None: if it was a param.grad, {HOOK}"
    if isinstance(exc, KeyError) and exc.args and hasattr(exc.args[0], "shape"):
        return (
            "a dict of yours was looked up with a tensor that is none of its keys: if a "
            f"hook got it, {HOOK}"
        )
    if re.search(rf"shape '\[{world_size}, -1\]' is invalid for input of size", said):
        return (
            f"a tensor cut into {world_size} rows was not a multiple of {world_size} "
            f"long: pad it with zeros to a multiple of the world size ({world_size}) "
            "first"
        )
    shapes = sorted(set(re.findall(r"TensorShape=\[(\d+)\]", said)))
    if "mismatch between collectives" in said and len(shapes) > 1:
        return (
            f"the ranks' pieces differ in size ({' vs '.join(shapes)} elements): pad "
            f"each flattened tensor with zeros to a multiple of the world size "
            f"({world_size}) before you cut it into {world_size} equal pieces"
        )
    return ""


def ddp(exc, index, where, steps: list[dict], world_size: int = 3) -> str:
    """Lab 2: gradients of the previous step in no all-reduce when finish() returned (a
    bucket left open), else what every lab's students get wrong."""
    left = []
    if steps:
        last = steps[-1]
        sent = {name for reduce in last["all_reduces"] for name in reduce["params"]}
        left = [e[1] for e in last["events"] if e[0] == "grad" and e[1] not in sent]
    if left:
        return (
            f"In step {index - 1}, {len(left)} gradient(s) ({', '.join(left[:3])}"
            f"{', ...' * (len(left) > 3)}) were in no all-reduce when finish() "
            "returned: finish() must send the last, partly filled bucket, and empty it"
        )
    return common(exc, world_size, where)


def ring(size: int, world_size: int, error: str = "") -> str:
    """Lab 3: what is special about a case the ring failed on: a send or receive that timed
    out (every rank sending first: a deadlock), else its size against N."""
    if "timed out" in error.lower():
        return (
            " (a send or receive timed out: if every rank sends before it receives, each "
            "waits for a neighbour that is itself sending, a deadlock; post both at once, "
            "a dist.P2POp each passed to dist.batch_isend_irecv, then wait())"
        )
    if size < world_size:
        return (
            f" (shorter than N: torch.chunk gives fewer than {world_size} pieces here; "
            f"torch.tensor_split(tensor, {world_size}) gives {world_size}, some empty)"
        )
    if size % world_size:
        return (
            f" ({world_size} does not divide {size}: the chunks differ in size, so each "
            "send and receive must use its own chunk's size)"
        )
    return ""


def zero3(world_size: int):
    """Lab 5's hint(exc, step, where): weights freed before backward read them, else common."""

    def hint(exc: Exception, step, where) -> str:
        from zerobook.labs.freed import FreedStorage

        if isinstance(exc, FreedStorage) and ", backward" in str(exc):
            return (
                "backward reads the weights its forward used: gather a unit again in "
                "its backward pre-hook, before its backward runs; the root (embedding, "
                "final norm) stays gathered for the whole step"
            )
        return common(exc, world_size, where)

    return hint


def zero(world_size: int):
    """Lab 4's hint(exc, step, where): in step(), an all-gathered parameter viewed or
    copied whole, its padding in; else what every lab's students get wrong."""

    def hint(exc: Exception, step, where) -> str:
        said, function = str(exc), (where or {}).get("function", "")
        shape = re.search(
            r"shape '\[([\d, ]+)\]' is invalid for input of size (\d+)", said
        )
        sizes = re.search(
            r"size of tensor a \((\d+)\) must match the size of tensor b", said
        )
        if function == "step" and (shape or sizes):
            return (
                "the all-gathered tensor holds padded(p) elements, the parameter's "
                f"N = {world_size} pieces with the zero padding at the end: copy back "
                "its first p.numel() elements, cut from the padding, then view_as(param)"
            )
        return common(exc, world_size, where)

    return hint


def zeropp(world_size: int, block: int):
    """Lab 9's hint(exc, stage, where): a gather buffer of another dtype or size, a group
    left out or the global rank used for the node's, values not padded to whole blocks,
    else what every lab's students get wrong."""

    def hint(exc: Exception, stage, where) -> str:
        said, function = str(exc), (where or {}).get("function", "")
        if re.search(r"invalid tensor size|world_size times|output tensor size", said):
            which = (
                "to the all-gather"
                if function == "secondary_gather"
                else "to every collective (the scales' too)"
            )
            return (
                "an all-gather's output holds one input for each rank it runs over, and a "
                f"collective without group= runs over all {world_size} ranks: over the "
                f"node, pass group=group {which} and size its output "
                "dist.get_world_size(group) times its input"
            )
        if isinstance(exc, IndexError) and function in (
            "secondary_piece",
            "node_group",
        ):
            return (
                "a global rank used as an index within the node: there the index is the "
                "rank in the group, dist.get_rank(group) (rank 2 is the first rank of its "
                "node); the node of a rank is number rank // node_size"
            )
        if re.search(r"same (type|dtype)|dtype.*match|must have the same", said):
            return (
                "an all-gather's output buffer must have its input's dtype and "
                f"{world_size} times its elements: int8 codes into an int8 buffer, fp32 "
                "scales into an fp32 one"
            )
        if re.search(rf"shape '\[(-1|\d+), {block}\]' is invalid", said):
            return (
                f"pad the values with zeros to a multiple of the block ({block}) before "
                "you cut them into blocks; dequantize returns the first `numel` again"
            )
        return common(exc, world_size, where)

    return hint
