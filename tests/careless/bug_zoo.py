"""Lab 8's careless class (the bug zoo): CLASS[student] = (replacements, parts lost, words
shown)."""

ZOO_SKIP = "        if bad.item():\n"
CLASS = {
    "skips_when_every_rank_overflowed": (
        (ZOO_SKIP, "        if bad.item() == dist.get_world_size():\n"),
        {"test_skip"},
        ["holds NaN or inf: a step ran on a loss that was not finite"],
    ),
}  # a seed per rank is the released replicas bug: the release scores 0 (test_grading_labs)
