"""Lab 7's careless class (the capstone): CLASS[student] = (replacements, parts lost, words shown).
A crash in the training launch loses its four tests and keeps the resume test (a launch of
its own) when the mistake is in the DDP, which resuming does not use; a load_shard that leaves
the master pieces or the optimizer's state as they were loses the resume test alone."""

from careless.common import DDP_DIV, DDP_HOOK
from careless.zero3 import CLASS as ZERO3
from test_capstone_lab import CLIP_SUM

TRAIN = {
    "test_curves",
    "test_clip",
    "test_kept",
    "test_target",
}  # one launch; resume: its own
CLASS = {
    "ddp_sum_not_mean": (
        (DDP_DIV, ""),
        TRAIN,
        ["holds 'sum', not the mean of every rank's"],
    ),
    "ddp_register_hook": (
        (
            DDP_HOOK + "\n        self.bucket, self.bucket_bytes",
            "param.register_hook(self.on_grad)\n        self.bucket, self.bucket_bytes",
        ),
        TRAIN,
        ["capstone_student.py, line", "'NoneType' object has no attribute 'numel'"],
    ),
    "zero3_prefetch_of_the_wrong_unit": (
        ZERO3["prefetch_of_the_wrong_unit"][0],
        "all",
        ["in wait: `rows[:, offset", "after its storage was freed"],
    ),
    "zero3_root_freed_after_its_forward": (
        ZERO3["root_freed_after_its_forward"][0],
        "all",
        [
            "embed.weight's storage was freed (resized to 0 bytes) when it was about to be "
            "used by backward (root's)"
        ],  # fmt: skip
    ),
}
CLASS["norm_summed_backwards"] = (
    (
        "    for piece in pieces:\n" + CLIP_SUM,
        "    for piece in reversed(pieces):\n" + CLIP_SUM,
    ),
    {
        "test_curves",
        "test_clip",
    },  # trains as well: bytes, target, resume keep their points
    ["summed in another order"],
)
CLASS["load_binds_the_pieces_to_a_new_name"] = (
    ("            master.copy_(saved)\n", "            master = saved\n"),
    {"test_resume"},  # the training launch never loads
    [
        "after your load_shard, the master pieces of every parameter",
        "in place (copy_)",
    ],
)
CLASS["load_skips_the_optimizer_state"] = (
    ('    zero3.optimizer.load_state_dict(state["optimizer"])\n', ""),
    {"test_resume"},
    [
        "the optimizer's state (exp_avg, exp_avg_sq, step) of the pieces of every "
        "parameter",
        "load it with load_state_dict",
    ],
)
