"""Lab 1's careless class (memory): CLASS[student] = (replacements, parts lost, words shown):
Part 2's in the rank script, Part 1's (PART1) in bytes_per_rank's cell."""

COUNTED = "                counts[name] += tensor.untyped_storage().nbytes()\n"
CLASS = {
    "counts_tensors_not_storages": (  # a flat buffer's padding missed
        (
            COUNTED,
            "                counts[name] += tensor.numel() * tensor.element_size()\n",
            "            if key not in seen:\n",
            "            if True:\n",
        ),
        {"test_measurement"},
        [
            "flat, rank 0: params counted",
            "a storage holds more than the views you were given: count each storage at "
            "its full size",
        ],
    ),
    "counts_a_storage_by_its_first_view": (  # once per storage, at one view's size
        (
            COUNTED,
            "                counts[name] += tensor.numel() * tensor.element_size()\n",
        ),
        {"test_measurement"},
        [
            "fp32, rank 0: grads counted",
            "a storage holds more than the views you were given",
        ],
    ),
    "dedups_per_list_only": (  # the arena's one storage counted in every list
        (
            "        counts[name] = 0\n",
            "        counts[name] = 0\n        seen = set()\n",
        ),
        {"test_measurement"},
        [
            "arena, rank 0: grads counted",
            "are storages an earlier list holds: count each storage once across all three "
            "lists, in the first list that holds it",
        ],
    ),
    "keys_by_the_views_pointer": (  # each view of one storage counted at the storage's size
        (
            "key = (tensor.device, tensor.untyped_storage().data_ptr())",
            "key = (tensor.device, tensor.data_ptr())",
        ),
        {"test_measurement"},
        ["fp32, rank 0: grads counted", "a storage was counted twice"],
    ),
    "never_dedups": (  # every tensor's storage, however many tensors share it
        ("            if key not in seen:\n", "            if True:\n"),
        {"test_measurement"},
        ["fp32, rank 0: grads counted", "count each storage once, not each tensor"],
    ),
    "forgets_the_optimizer_list": (
        (
            '        ("optimizer", optimizer_states),\n',
            '        ("optimizer", []),\n',
        ),
        {"test_measurement"},
        ["fp32, rank 0: optimizer counted 0 bytes", "none of its storages was counted"],
    ),
}

# Part 1's mistakes, in its own cell (part1_bytes_per_rank: tests/test_careless.careless plants
# them there); tests/test_lab_memory.py also runs each against the instructor's test cell, its
# hidden tests included, in one process.
PER = "GB per GPU"
PART1 = {
    "optimizer_state_without_master_weights": (  # 8 bytes a parameter, not 12
        ("optimizer_bytes=12", "optimizer_bytes=8"),
        {"test_accounting"},
        [
            f"stage 0: 90.00 {PER} (params 15.00, grads 15.00, optimizer 60.00)",
            "the paper's 120.0 GB (7.5B, 64 GPUs)",
        ],
    ),
    "stage_3_keeps_every_weight": (
        ("(world_size if stage >= 3 else 1)", "1"),
        {"test_accounting"},
        [
            f"stage 3: 16.64 {PER} (params 15.00, grads 0.23, optimizer 1.41)",
            "the paper's 1.9 GB (7.5B, 64 GPUs)",
        ],
    ),
    "gradients_sharded_from_stage_1": (
        ("(world_size if stage >= 2 else 1)", "(world_size if stage >= 1 else 1)"),
        {"test_accounting"},
        [
            f"stage 1: 16.64 {PER} (params 15.00, grads 0.23, optimizer 1.41)",
            "the paper's 31.4 GB (7.5B, 64 GPUs)",
        ],
    ),
    "world_size_0_not_refused": (  # a hidden call: named with its arguments
        (
            '    if world_size < 1:\n        raise ValueError(f"world_size must be >= 1, '
            'got {world_size}")\n',
            "",
        ),
        {"test_accounting"},
        [
            "bytes_per_rank(1000000000.0, 1, 0) raised ZeroDivisionError",
            "raise ValueError naming the argument out of range",
        ],
    ),
    "total_without_the_optimizer_state": (
        ('"total": params + grads + optimizer', '"total": params + grads'),
        {"test_accounting"},
        [
            f"stage 0: 30.00 {PER} (params 15.00, grads 15.00, optimizer 90.00)",
            "the paper's 120.0 GB (7.5B, 64 GPUs)",
        ],
    ),
    "a_random_case_off": (  # right on the paper's example, wrong where param_bytes is 4
        (
            "params = num_params * param_bytes",
            "params = num_params * 2",
        ),
        {"test_accounting"},
        ["bytes_per_rank(", "'param_bytes': 4", "expected"],
    ),
}
CLASS.update(PART1)
