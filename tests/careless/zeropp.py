"""Lab 9's careless class (ZeRO++): CLASS[student] = (replacements, parts lost, words shown)."""

ZPP_GATHER = (
    "    dist.all_gather_into_tensor(all_codes, codes, group=group)\n"
    "    dist.all_gather_into_tensor(all_scales, scales, group=group)\n"
    "    pieces = zip(all_codes.chunk(n), all_scales.chunk(n))\n"
    "    return torch.cat([dequantize(c, s, shard.numel(), shard.dtype) for c, s in pieces])\n"
)
CLASS = {
    "gathers_the_shard_itself": (  # issue 64: every test needs the idea
        (
            ZPP_GATHER,
            "    full = shard.new_empty(n * shard.numel())\n"
            "    dist.all_gather_into_tensor(full, shard, group=group)\n"
            "    return full\n",
        ),
        {"test_gather_bytes", "test_gather", "test_train"},
        [
            "two bytes an element: quantize before you send",
            "every rank's piece is its shard, bit for bit: nothing was quantized",
            "your training's loss is ZeRO-3's at every step, bit for bit",
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
        {
            "test_quantizer",
            "test_gather",
            "test_train",
        },  # bytes and the node's pieces kept
        ["more than its bound"],
    ),
}
