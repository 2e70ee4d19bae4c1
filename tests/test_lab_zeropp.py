"""The ZeRO++ lab's (Lab 9) harness against wrong student code: each mistake loses only its
parts and is named (the block, rank, group or bytes, and what to do); a crash in one stage is
named by the student's line and leaves the other stages checked."""

import pytest

import zerobook as zb
from lab_helpers import lab_solution, planted
from zerobook.labs import zeropp_checks

# starts ranks with torchrun; the labs' feedback on planted mistakes: make test-grading
pytestmark = [pytest.mark.launch, pytest.mark.slow]


def zeropp_problems(student: str) -> dict[str, list[str]]:
    """Every check's problems, over every rank, of one launch on 4 ranks."""
    run = zb.grading.run_part("zeropp", student, "zeropp", nproc=4)
    return {check: zeropp_checks.problems(run, check) for check in zeropp_checks.CHECKS}


def test_zeropp_the_reference_passes_every_check_on_every_rank(tmp_path):
    student = tmp_path / "zeropp_student.py"
    student.write_text(lab_solution("zeropp"))
    found = zeropp_problems(str(student))
    assert not any(found.values()), found


CODES = "return steps.round().clamp(-LEVELS, LEVELS).to(torch.int8).flatten(), scales"
SCALES = "largest = rows.abs().max(dim=1).values"
GATHER = (
    "    n = dist.get_world_size(group)\n    codes, scales = quantize(shard, block)\n"
)
WORLD = """    n = dist.get_world_size(group)
    codes, scales = quantize(shard, block)
    all_codes = codes.new_empty(n * codes.numel())
    all_scales = scales.new_empty(n * scales.numel())
    dist.all_gather_into_tensor(all_codes, codes, group=group)
    dist.all_gather_into_tensor(all_scales, scales, group=group)"""
PIECES = "pieces = zip(all_codes.chunk(n), all_scales.chunk(n))"
NODES = """    groups = [
        dist.new_group(list(range(start, start + node_size)))
        for start in range(0, world, node_size)
    ]
    return groups[rank // node_size]"""
STRIDED = """    nodes = world // node_size
    groups = [dist.new_group(list(range(s, world, nodes))) for s in range(nodes)]
    return groups[rank % nodes]"""
PIECE = "    return full.view(g, -1)[i].clone()"
SECONDARY = "    full = piece.new_empty(dist.get_world_size(group) * piece.numel())\n    dist.all_gather_into_tensor(full, piece, group=group)"
PADDED = "rows = F.pad(values.float(), (0, -values.numel() % block)).view(-1, block)"

ZEROPP_MISTAKES = {  # name -> (old, new, the checks that fail, (a check, what it says))
    "truncated": (CODES, CODES.replace("steps.round().", "steps."), {"quantizer", "gather", "gather_group"},
                  ("gather", "round to the nearest integer (torch.round)")),
    "one_scale": (SCALES, "largest = rows.abs().max().expand(len(rows))",  # not "cast once" (issue 67)
                  {"quantizer", "gather", "gather_group"}, ("gather", "one scale for the whole tensor; each block")),
    "sends_bf16": (GATHER, GATHER.replace("    codes,", "    full = shard.new_empty(n * shard.numel())\n    dist.all_gather_into_tensor(full, shard, group=group)\n    return full\n    codes,"),
                   {"gather_bytes", "gather", "gather_group", "train"},  # what needs the idea (issue 64)
                   ("gather_bytes", "its bf16 values, two bytes an element")),
    "own_scales": (PIECES, "pieces = zip(all_codes.chunk(n), [scales] * n)", {"gather", "gather_group", "train"},
                   ("gather", "dequantize each rank's codes with that rank's scales")),
    "float_codes": (CODES, CODES.replace(".to(torch.int8)", ""), {"quantizer", "gather_bytes", "gather_group"},
                    ("quantizer", "int8, one byte an element")),
    "strided_nodes": (NODES, STRIDED, {"node"}, ("node", "its node is ranks [0, 1]")),
    "view_kept": (PIECE, "    return full.view(g, -1)[i]", {"secondary", "train"},
                  ("secondary", "a view keeps all of `full` alive")),
    "gather_everywhere": (SECONDARY, "    full = piece.new_empty(dist.get_world_size() * piece.numel())\n    dist.all_gather_into_tensor(full, piece)",
                          {"backward", "train"}, ("backward", "stays inside the node, ranks [0, 1]")),
    "zero_scale": ("scales = torch.where(largest == 0, 1.0, largest / LEVELS)", "scales = largest / LEVELS",
                   {"quantizer"}, ("quantizer", "block 1's scale is 0 or not finite")),
    "own_node_only": (NODES, "    start = rank // node_size * node_size\n    return dist.new_group(list(range(start, start + node_size)))",
                      {"node"}, ("node", "rank 0 asked for ranks [0, 1], rank 2 for [2, 3]")),
    "short_piece": ("g, i = dist.get_world_size(group), dist.get_rank(group)", "g, i = dist.get_world_size(), dist.get_rank(group)",
                    {"secondary", "train"}, ("secondary", "keeps full.view(g, -1)[i]")),  # backward gathers the harness's piece
    "own_repeated": ("    return torch.cat([dequantize(c, s, shard.numel(), shard.dtype) for c, s in pieces])",
                     "    return shard.repeat(n)", {"gather", "gather_group", "train"}, ("gather", "it holds your own shard's values (rank 0's)")),
    "reversed_pieces": ("    dist.all_gather_into_tensor(full, piece, group=group)\n    return full",
                        "    dist.all_gather_into_tensor(full, piece, group=group)\n    return full.view(2, -1).flip(0).reshape(-1)",
                        {"backward", "train"}, ("train", "step 0's loss matched (forward's weights were right)")),
    "scales_over_the_world": ("dist.all_gather_into_tensor(all_scales, scales, group=group)",  # issue 67
                              "dist.all_gather_into_tensor(all_scales, scales)", {"gather_group"},
                              ("gather_group", "pass group=group to every collective (the scales' too)")),
    "ignores_group": (WORLD, WORLD.replace("(group)", "()").replace(", group=group", ""),
                      {"gather_group"}, ("gather_group", "pass group=group to each")),
    "own_piece_exact": ("    return torch.cat([dequantize(c, s, shard.numel(), shard.dtype) for c, s in pieces])",
                        "    out = [dequantize(c, s, shard.numel(), shard.dtype) for c, s in pieces]\n"
                        "    out[dist.get_rank(group)] = shard\n    return torch.cat(out)",
                        {"gather", "gather_group"}, ("gather", "your own piece is your shard, bit for bit")),
    "backward_without_group": ("    dist.all_gather_into_tensor(full, piece, group=group)\n",
                               "    dist.all_gather_into_tensor(full, piece)\n", {"backward", "train"},
                               ("backward", "over the node, pass group=group")),
}  # fmt: skip


@pytest.mark.parametrize("mistake", sorted(ZEROPP_MISTAKES))
def test_zeropp_a_mistake_loses_only_its_parts_and_is_named(tmp_path, mistake):
    """Rounding toward zero or one scale for every block costs the quantizer and the gathered
    values; bf16 on the wire, or float codes, the bytes; another rank's scales, or its own shard
    kept unquantized, the values alone;
    strided nodes the node; a view kept the secondary piece; a gather over every rank backward's;
    the scales gathered over the world the gather over a group alone."""
    old, new, failing, (check, named) = ZEROPP_MISTAKES[mistake]
    found = zeropp_problems(planted(tmp_path, "zeropp", mistake, old, new))
    assert {name for name, problems in found.items() if problems} == failing, found
    assert any(named in problem for problem in found[check]), found[check]


def test_zeropp_a_crash_in_one_stage_is_named_and_the_others_still_count(tmp_path):
    """Values never padded: quantize raises on every rank, so the quantizer and both gather
    checks say "not checked" with the student's line and the hint; node and hpZ still pass.
    A piece taken by the global rank raises on ranks 2 and 3 only: the secondary stage is
    named there, rank 0 and 1's pass."""
    unpadded = planted(tmp_path, "zeropp", "unpadded", PADDED,
                       "rows = values.float().view(-1, block)")  # fmt: skip
    found = zeropp_problems(unpadded)
    assert {n for n, p in found.items() if p} == {
        "quantizer",
        "gather_bytes",
        "gather",
        "gather_group",
        "train",
    }
    said = found["quantizer"][0]
    assert "not checked" in said and "zeropp_student.py, line" in said, said
    assert "pad the values with zeros to a multiple of the block (64)" in said, said
    by_rank = planted(tmp_path, "zeropp", "by_rank", "g, i = dist.get_world_size(group), dist.get_rank(group)",
                      "g, i = dist.get_world_size(group), dist.get_rank()")  # fmt: skip
    run = zb.grading.run_part("zeropp", by_rank, "zeropp", nproc=4)
    assert zeropp_checks.problems(run, "secondary", ranks=(0, 1)) == []
    said = zeropp_checks.problems(run, "secondary", ranks=(2, 3))
    assert (
        said and said[0].startswith("rank 2: not checked") and "IndexError" in said[0]
    ), said
    assert "the index is the rank in the group, dist.get_rank(group)" in said[0], said
    said = zeropp_checks.problems(
        run, "train", ranks=(0,)
    )  # not run: named by rank 2's error
    assert "the secondary stage failed before it" in said[0] and "rank 2" in said[0], (
        said
    )
    assert "IndexError" in said[0] and "zeropp_student.py, line" in said[0], said


@pytest.mark.parametrize(
    "patch, named",
    [
        (
            "from zerobook.data_parallel import comm\n"
            "comm.CommMeter._record_collective = lambda *args: None\n",
            "zerobook.data_parallel is not a module this lab's file may import",
        ),
        (
            "import __main__\n"
            "__main__.block_errors = lambda got, want: [{'error': 0.0, 'largest': 1.0}]\n",
            "__main__ is not a module this lab's file may import",
        ),
    ],
    ids=["meter", "errors"],
)
def test_zeropp_a_file_that_patches_the_meter_or_the_errors_scores_nothing(
    tmp_path, patch, named
):
    """The meter that counts the bytes and the function that measures each block's error are
    the harness's: a file cannot reach either (its lab's rules refuse the modules by name)."""
    student = tmp_path / "zeropp_student.py"
    student.write_text(lab_solution("zeropp") + "\n" + patch)
    with pytest.raises(zb.LaunchError, match=named):
        zb.grading.run_part("zeropp", str(student), "zeropp", nproc=4)
