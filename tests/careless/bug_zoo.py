"""Lab 8's careless class (the bug zoo): CLASS[student] = (replacements, parts lost, words
shown). Each is the reference with one repair undone or done wrong; a seed per rank is the
released replicas bug (the release scores 0: test_grading_labs). Five: each submission
costs ~100 s to grade. A ddp_step that divides before the all-reduce loses nothing
(tests/test_lab_bug_zoo.py)."""

ZOO_SKIP = "        if bad.item():\n"
ZOO_FLAG = (
    "        dist.all_reduce(bad)  # every rank learns if any rank's loss overflowed\n"
)
ZOO_SEED = (
    "    torch.manual_seed(seed)  # the same on every rank: the replicas start equal\n"
)
ZOO_STEPS = (
    "    steps = len(x) // (n * batch)  # the same on every rank\n"
    "    x, y = x[rank::n], y[rank::n]\n"
)
CLASS = {
    "skips_when_every_rank_overflowed": (
        (ZOO_SKIP, "        if bad.item() == dist.get_world_size():\n"),
        {"test_skip"},
        [
            "at step 3 this rank's own loss was not finite, and it stepped",
            "holds NaN or inf: a step ran on a loss that was not finite",
        ],
    ),
    "overflow_flag_broadcast_from_rank_0": (
        (ZOO_FLAG, "        dist.broadcast(bad, 0)\n"),
        {"test_skip"},
        [
            "at step 4 rank 1's loss was not finite, and this rank stepped: rank 1's "
            "overflow never reached it",
            "as if every rank heard rank 0's flag alone, a broadcast from rank 0",
        ],
    ),
    "replicas_seeded_per_rank": (
        (ZOO_SEED, "    torch.manual_seed(seed + dist.get_rank())\n"),
        {"test_replicas"},
        ["the replicas started apart: before any step, the weights make_model() built"],
    ),
    "steps_counted_over_the_share": (
        (
            ZOO_STEPS,
            "    x, y = x[rank::n], y[rank::n]\n    steps = len(x) // (n * batch)\n",
        ),
        {"test_uneven"},
        ["with 55 samples: took 2 steps where a correct loop takes 6"],
    ),
    "ddp_step_without_the_division": (
        ("        p.grad /= dist.get_world_size()\n", ""),
        "all",
        ["your ddp_step steps with the sum of the ranks' gradients, not their mean"],
    ),
}
