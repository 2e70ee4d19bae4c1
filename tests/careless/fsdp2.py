"""Lab 6's careless class (FSDP2): CLASS[student] = (replacements, parts lost, words shown)."""

FS_POLICY = (
    "MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)"
)
CLASS = {
    "skips_the_sharding": (  # issue 64: every test needs the idea
        (
            "    for block in model.blocks:\n"
            "        fully_shard(block, mesh=mesh, mp_policy=policy)\n"
            "    fully_shard(model, mesh=mesh, mp_policy=policy)\n",
            "",
        ),
        "all",
        ["shard() left the root, blocks.0, blocks.1, blocks.2 without fully_shard"],
    ),
    "fp32_communication": (
        (FS_POLICY, "MixedPrecisionPolicy()"),
        {"test_parity", "test_traffic"},
        [
            "the losses differ",
            "with reduce_dtype=bf16 the collectives should move exactly what ours moves",
        ],
    ),
    "no_forward_prefetch": (
        ("block.set_modules_to_forward_prefetch(blocks[k + 1 : k + 2])", "pass"),
        {"test_prefetch"},
        ["blocks.1 is not gathered before blocks.0 computes"],
    ),
    "weights_only_checkpoint": (
        (
            'dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)',
            'dcp.save({"model": model_state}, checkpoint_id=path)',
            'state = {"model": model_state, "optim": optim_state}',
            'state = {"model": model_state}',
            'optim_state_dict=state["optim"]',
            "optim_state_dict=optim_state",
        ),
        {"test_checkpoint"},
        ["save must write every weight and AdamW moment there, with dcp.save"],
    ),
    "saves_only_the_model": (  # issue 67: DCP's CheckpointException is a BaseException
        (
            'dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)',
            'dcp.save({"model": model_state}, checkpoint_id=path)',
        ),
        {"test_checkpoint"},
        ["save must write every weight and AdamW moment there, with dcp.save"],
    ),
    "root_not_sharded": (  # issue 67: torch's AttributeError in every part, before
        ("    fully_shard(model, mesh=mesh, mp_policy=policy)\n", ""),
        "all",
        [
            "shard() left the root without fully_shard: fully_shard each block, then "
            "the root (the model itself)"
        ],
    ),
    "fp16_for_bf16": (  # issue 67: the losses differ by fp16-against-bf16 amounts
        (
            FS_POLICY,
            FS_POLICY.replace(
                "param_dtype=torch.bfloat16", "param_dtype=torch.float16"
            ),
        ),
        {"test_parity"},
        ["your blocks computed in float16, ours in bfloat16"],
    ),
    "prefetch_swapped": (  # issue 67: the traffic test blamed the dtype
        (
            "block.set_modules_to_forward_prefetch(blocks[k + 1 : k + 2])",
            "block.set_modules_to_forward_prefetch(blocks[k - 1 : k] if k else [])",
            "block.set_modules_to_backward_prefetch(blocks[k - 1 : k] if k else [])",
            "block.set_modules_to_backward_prefetch(blocks[k + 1 : k + 2])",
        ),
        {"test_traffic", "test_prefetch"},
        [
            "bytes of weights (param_dtype), 616,448 wanted: not a dtype's 2x but how often",
            "blocks.1 is not gathered before blocks.0 computes",
        ],
    ),
    "loads_without_set_state_dict": (  # issue 67: the learning rate stays the fresh one's
        (
            "    set_state_dict(\n        model,\n        optimizer,\n"
            '        model_state_dict=state["model"],\n'
            '        optim_state_dict=state["optim"],\n    )\n',
            "",
        ),
        {"test_checkpoint"},
        [
            "after load the learning rate is 0.001, the checkpoint's 0.0005",
            "set_state_dict(model, optimizer, ...) puts it into the optimizer",
        ],
    ),
}
