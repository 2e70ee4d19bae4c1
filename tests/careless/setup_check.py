"""Lab 0's careless class (the set-up check): CLASS[student] = (replacements, parts lost,
words shown)."""

REDUCE = "    dist.all_reduce(value, op=dist.ReduceOp.SUM)\n"
GATHER = "    dist.all_gather_object(everyone, mine)\n    return everyone\n"
CLASS = {
    "total_off_by_one": (  # the ranks counted from 0: sum of range(world_size)
        (
            "    return world_size * (world_size + 1) // 2\n",
            "    return world_size * (world_size - 1) // 2\n",
        ),
        {"test_part1"},
        ["expected_total(4) returned 6: ranks 0-3 contribute 1, 2, 3"],
    ),
    "no_all_reduce": (  # each rank returns its own contribution
        (REDUCE, ""),
        {"test_all_reduce"},
        ["the ranks returned [1.0, 2.0, 3.0, 4.0], not 10 on each", "(SUM)"],
    ),
    "returns_the_tensor": (
        ("    return value.item()\n", "    return value\n"),
        {"test_all_reduce"},
        ["return a plain number (tensor.item()), not a tensor"],
    ),
    "max_not_sum": (
        (REDUCE, REDUCE.replace("SUM", "MAX")),
        {"test_all_reduce"},
        ["the ranks returned [4.0, 4.0, 4.0, 4.0], not 10 on each", "(SUM)"],
    ),
    "gathers_only_its_own": (
        (GATHER, "    return [mine]\n"),
        {"test_gather"},
        ["all-gather what each rank sees"],
    ),
}
