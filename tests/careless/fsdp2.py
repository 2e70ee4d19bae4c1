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
        ["'Block' object has no attribute 'set_modules_to_forward_prefetch'"],
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
}
