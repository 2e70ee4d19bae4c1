"""Lab 3's careless class (ring all-reduce): CLASS[student] = (replacements, parts lost, words
shown)."""

RING_SECOND = """    for step in range(world_size - 1):
        exchange(
            parts[(rank + 1 - step) % world_size], parts[(rank - step) % world_size]
        )
"""
CLASS = {
    "skips_the_communication": (  # issue 64: every test needs the idea
        (
            "    for step in range(world_size - 1):\n        send, recv",
            "    tensor.mul_(world_size)\n    for step in range(0):\n        send, recv",
            RING_SECOND,
            "",
        ),
        "all",
        ["differs from dist.all_reduce for", "sent 0 bytes, a ring sends"],
    ),
    "no_all_gather_half": (
        (RING_SECOND, ""),
        "all",
        ["differs from dist.all_reduce for"],
    ),
    "through_rank_0": (  # all-reduce's job done another way: correct, not a ring's bytes
        (
            "    for step in range(world_size - 1):\n        send, recv",
            "    if rank:\n"
            "        dist.send(tensor, 0)\n"
            "        dist.recv(tensor, 0)\n"
            "    else:\n"
            "        for peer in range(1, world_size):\n"
            "            other = torch.empty_like(tensor)\n"
            "            dist.recv(other, peer)\n"
            "            tensor.add_(other)\n"
            "        for peer in range(1, world_size):\n"
            "            dist.send(tensor, peer)\n"
            "    for step in range(0):\n        send, recv",
            RING_SECOND,
            "",
        ),
        {"test_bytes"},
        ["a ring sends"],
    ),
}
