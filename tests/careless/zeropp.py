"""Lab 9's careless class (ZeRO++): CLASS[student] = (replacements, parts lost, words shown)."""

ZPP_GATHER = (
    "    dist.all_gather_into_tensor(all_codes, codes, group=group)\n"
    "    dist.all_gather_into_tensor(all_scales, scales, group=group)\n"
    "    pieces = zip(all_codes.chunk(n), all_scales.chunk(n))\n"
    "    return torch.cat([dequantize(c, s, shard.numel(), shard.dtype) for c, s in pieces])\n"
)
ZPP_PIECE = "    g, i = dist.get_world_size(group), dist.get_rank(group)\n"
CLASS = {
    "gathers_the_shard_itself": (  # issue 64: every test needs the idea
        (
            ZPP_GATHER,
            "    full = shard.new_empty(n * shard.numel())\n"
            "    dist.all_gather_into_tensor(full, shard, group=group)\n"
            "    return full\n",
        ),
        {"test_gather_bytes", "test_gather", "test_gather_group", "test_train"},
        [
            "two bytes an element: quantize before you send",
            "every rank's piece is its shard, bit for bit: nothing was quantized",
            "your training's loss is ZeRO-3's at every step, bit for bit",
        ],
    ),
    "own_piece_unquantized": (  # the trial's "bit for bit, were not quantized", said plainly
        (
            "    return torch.cat([dequantize(c, s, shard.numel(), shard.dtype) for c, s in pieces])\n",
            "    out = [dequantize(c, s, shard.numel(), shard.dtype) for c, s in pieces]\n"
            "    out[dist.get_rank(group)] = shard  # my own shard, exact\n"
            "    return torch.cat(out)\n",
        ),
        {"test_gather", "test_gather_group"},
        [
            "your own piece is your shard, bit for bit",
            "dequantize your own codes and scales too",
        ],
    ),
    "piece_a_view": (
        (
            "    return full.view(g, -1)[i].clone()\n",
            "    return full.view(g, -1)[i]\n",
        ),
        {"test_secondary", "test_train"},  # the training keeps the pieces too
        ["a view keeps all of `full` alive; keep a copy (.clone())"],
    ),
    "scale_without_levels": (
        ("largest / LEVELS)", "largest)"),
        {"test_quantizer", "test_gather", "test_gather_group", "test_train"},
        ["more than its bound"],  # the bytes and the node's pieces kept
    ),
    "one_scale_per_tensor": (  # issue 67: was told to "dequantize in float32"
        (
            "largest = rows.abs().max(dim=1).values",
            "largest = rows.abs().max().expand(len(rows))",
        ),
        {"test_quantizer", "test_gather", "test_gather_group"},
        ["one scale for the whole tensor; each block has its own scale"],
    ),
    "scales_over_the_world": (  # issue 67: scored full marks when only the world gathered
        (
            "dist.all_gather_into_tensor(all_scales, scales, group=group)",
            "dist.all_gather_into_tensor(all_scales, scales)",
        ),
        {"test_gather_group"},
        ["pass group=group to every collective (the scales' too)"],
    ),
    "backward_gather_without_group": (  # issue 67: gloo's size error, named as a group's
        (
            "    dist.all_gather_into_tensor(full, piece, group=group)\n",
            "    dist.all_gather_into_tensor(full, piece)\n",
        ),
        {"test_backward", "test_train"},
        ["secondary_gather", "over the node, pass group=group"],
    ),
    "piece_by_global_rank": (
        (ZPP_PIECE, ZPP_PIECE.replace("dist.get_rank(group)", "dist.get_rank()")),
        {"test_secondary", "test_train"},
        ["the index is the rank in the group, dist.get_rank(group)"],
    ),
    "cast_error_a_whole_unit": (  # Part 1: a unit in the last place, not half of one
        ("return magnitude * 2**-8", "return magnitude * 2**-7"),
        {"test_bytes"},
        ["rounding to nearest errs by half of it, at most 2^-8 of the value"],
    ),
    "bytes_without_the_scales": (  # Part 1, answered before the code
        (
            "return math.ceil(numel / block) * (block + 4)",
            "return math.ceil(numel / block) * block",
        ),
        {"test_bytes"},
        ["one float32 scale (4 bytes) for each", "(the scales travel too)"],
    ),
}
