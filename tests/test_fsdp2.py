"""zerobook.fsdp2's reading of FSDP2's profiler ranges: which unit is gathered, when, by whom,
and how many bytes are gathered at once (no ranks launched: FSDP2's range names as torch 2.13
opens them, recorded from a 3-rank step of zerobook.runs.fsdp2_practice)."""

from torch.profiler import ProfilerActivity, profile, record_function

from zerobook.fsdp2 import all_gather_order, fsdp_ranges, peak_gathered, unit_of

# two blocks and the root, default reshard_after_forward (the root kept), implicit prefetch
STEP = [
    "FSDP::root_pre_forward",
    "FSDP::pre_forward",
    "FSDP::all_gather",
    "FSDP::all_gather_copy_out",
    "FSDP::pre_forward (blocks.0)",
    "FSDP::all_gather (blocks.0)",
    "FSDP::post_forward (blocks.0)",
    "FSDP::pre_forward (blocks.1)",
    "FSDP::all_gather (blocks.1)",
    "FSDP::post_forward (blocks.1)",
    "FSDP::post_forward",
    "FSDP::pre_backward",
    "FSDP::backward_prefetch for blocks.1",
    "FSDP::all_gather (blocks.1)",
    "FSDP::pre_backward (blocks.1)",
    "FSDP::backward_prefetch for blocks.0",
    "FSDP::all_gather (blocks.0)",
    "FSDP::post_backward_reshard (blocks.1)",
    "FSDP::post_backward_reduce (blocks.1)",
    "FSDP::pre_backward (blocks.0)",
    "FSDP::post_backward_reshard (blocks.0)",
    "FSDP::root_post_backward_callback",
    "FSDP::post_backward_reshard",
    "FSDP::post_backward_rs_wait ()",
]
BYTES = {"root": 1, "blocks.0": 10, "blocks.1": 100}


def test_units_are_named_as_fsdp2_names_them_the_root_without_a_name():
    assert unit_of("FSDP::all_gather (blocks.0)") == "blocks.0"
    assert unit_of("FSDP::backward_prefetch for blocks.1.mlp.0") == "blocks.1.mlp.0"
    assert (
        unit_of("FSDP::all_gather")
        == unit_of("FSDP::post_backward_rs_wait ()")
        == "root"
    )


def test_ranges_come_in_the_order_they_opened_and_only_fsdp2s():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("FSDP::pre_forward (a)"):
            with record_function("FSDP::all_gather (a)"):
                pass
        with record_function("not FSDP's"):
            pass
        with record_function("FSDP::post_forward (a)"):
            pass
    assert fsdp_ranges(prof) == [
        "FSDP::pre_forward (a)",
        "FSDP::all_gather (a)",
        "FSDP::post_forward (a)",
    ]


def test_the_order_says_which_pass_which_hook_and_whether_it_was_a_prefetch():
    order = [
        (g["pass"], g["unit"], g["by"], g["prefetch"]) for g in all_gather_order(STEP)
    ]
    assert order == [
        ("forward", "root", "root", False),
        ("forward", "blocks.0", "blocks.0", False),
        ("forward", "blocks.1", "blocks.1", False),
        ("backward", "blocks.1", "root", True),
        ("backward", "blocks.0", "blocks.1", True),
    ]


def test_the_peak_is_the_root_the_unit_computed_and_the_one_prefetched():
    assert peak_gathered(STEP, BYTES) == 1 + 100 + 10  # in blocks.1's backward
    forward_only = STEP[
        : STEP.index("FSDP::pre_backward")
    ]  # nothing gathered again: none freed
    assert peak_gathered(forward_only, BYTES) == 111


def test_a_unit_not_gathered_again_in_backward_stays_gathered_after_forward():
    kept = STEP[:11] + [n for n in STEP[11:] if not n.startswith("FSDP::all_gather (")]
    assert (
        peak_gathered(kept, BYTES) == 111
    )  # reshard_after_forward=False: every unit held
    assert [g["pass"] for g in all_gather_order(kept)] == ["forward"] * 3
