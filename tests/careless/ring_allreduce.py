"""Lab 3's careless class (ring all-reduce): CLASS[student] = (replacements, parts lost, words
shown)."""

RING_SECOND = """    for step in range(world_size - 1):
        exchange(
            parts[(rank + 1 - step) % world_size], parts[(rank - step) % world_size]
        )
"""
WAIT = """        for work in dist.batch_isend_irecv(ops):
            work.wait()
"""
FIRST_EXCHANGE = """        exchange(parts[send], buffer)
        parts[recv].add_(buffer)
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
        [
            "differs from dist.all_reduce",
            "your ring made 0 receive(s)",
            "sent 0 bytes, a ring sends",
        ],
    ),
    "no_all_gather_half": (
        (RING_SECOND, ""),
        "all",
        [
            "your ring made 3 receive(s) on rank 0; a ring makes 2(N - 1) = 6",
            "after the all-gather, chunk",
            "sent 3 chunks of S/N = 48000 bytes, a ring 6",
        ],
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
        ["a ring sends", "rank 0 sent 12 chunks of S/N"],
    ),
    "all_gather_with_the_reduce_scatters_index": (  # the right bytes to the wrong places
        (
            "parts[(rank + 1 - step) % world_size], parts[(rank - step) % world_size]",
            "parts[(rank - step) % world_size], parts[(rank - step - 1) % world_size]",
        ),
        {"test_correct"},
        [
            "after the all-gather, chunk",
            "not the sum of all 4 ranks' values",
            "the all-gather passes on finished chunks only",
        ],
    ),
    "never_waits": (
        (WAIT, "        dist.batch_isend_irecv(ops)\n"),
        {"test_correct"},
        [
            "returned without waiting on",
            "dist.batch_isend_irecv(ops)",
            "call wait() on every work",
        ],
    ),
    "adds_before_waiting": (
        (
            WAIT,
            "        return dist.batch_isend_irecv(ops)\n",
            FIRST_EXCHANGE,
            "        works = exchange(parts[send], buffer)\n"
            "        parts[recv].add_(buffer)\n"
            "        for work in works:\n"
            "            work.wait()\n",
            RING_SECOND,
            """    for step in range(world_size - 1):
        for work in exchange(
            parts[(rank + 1 - step) % world_size], parts[(rank - step) % world_size]
        ):
            work.wait()
""",
        ),
        {"test_correct"},
        [
            "after its reduce-scatter",
            "a received chunk read before its wait() returned",
        ],
    ),
    "one_reduce_scatter_step_too_many": (  # the sum is right: the all-gather overwrites
        (
            "    for step in range(world_size - 1):\n        send, recv",
            "    for step in range(world_size):\n        send, recv",
        ),
        {"test_bytes"},
        [
            "sent 7 chunks of S/N",
            "a ring's reduce-scatter takes world_size - 1 steps",
        ],
    ),
    "cuts_with_torch_chunk": (  # torch.chunk gives fewer than N pieces of a short tensor
        (
            "torch.tensor_split(tensor, world_size)",
            "torch.chunk(tensor, world_size)",
        ),
        {"test_correct"},
        ["torch.tensor_split(tensor, 4) gives 4"],
    ),
}
