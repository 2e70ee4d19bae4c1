"""Modules that moved into a room keep their old names (zerobook/_moved.py): each old name is
the very module of its new one, run once, with every public name the old module had."""

import json
import os
import subprocess
import sys

from conftest import ROOT
from zerobook._moved import MOVED, SPLIT

# every public name each old module had before it moved (the names a reader's code may use)
OLD_NAMES = {
    "plots": "COLUMN_PX CSS_PX_PER_INCH BOOK_STYLE use_book_style rendered_text_px PALETTE "
    "STAGE_COLORS max_model_size_chart redundancy_chart traffic_chart ring_steps_chart ring_grid "
    "bandwidth_chart gradient_bytes_chart reference_lines timeline_chart gathered_bytes_chart "
    "scaling_chart prediction_chart predicted_bars gantt measured_beside_predicted",
    "diagrams": "KINDS KIND_COLORS KIND_NAMES OTHER_COLORS sharded_kinds held_ranges "
    "padding_ranges held_bytes draw_buffer draw_stage shard_layout_chart model_states_rows "
    "amount stacked_bytes_chart held_spans unit_timeline_chart all_reduce_chart resume_chart",
    "widgets": "DEVICES_GB HTML stage_explorer summary params_label psi_choices "
    "stage_explorer_live html_table STEP_METHODS STEP_CHOICES STEP_DEFAULTS step_arguments "
    "step_explorer step_summary memory_sentence step_explorer_live",
    "gpu_plots": "MiB GiB offload_memory_chart",
    "capstone_plots": "METHODS smoothed curves_chart resume_chart",
    "memory": "GB GiB STAGES STAGE_NAMES ModelStates Recipe RECIPES check_positive check_sizes "
    "check_stage bytes_per_param model_state_bytes max_model_params min_world_size "
    "comm_elements_per_step activation_bytes_per_layer DROPOUT_TERMS activation_terms "
    "transformer_params deepspeed_zero2_estimate deepspeed_zero3_estimate deepspeed_label "
    "stage_table format_table main",
    "traffic": "BUS_FACTORS check ring_all_reduce_bytes parameter_server_bytes bandwidth "
    "fit_alpha_beta predicted_seconds",
    "zero_paper": "TABLE_1_MODELS TABLE_1 TABLE_1_DEVICE_GB TABLE_2 FIGURE_1 UNITS value "
    "last_digit agrees",
    "hardware": "TFLOPS GB H100_SXM H200_SXM DATASHEETS NCCL_NVLINK NCCL_NIC GENERATIONS ROOFLINE "
    "ELEMENTWISE_BYTES Hardware datasheet nccl_nvlink H100_NODE A100_NODE PRESETS",
    "launch": (
        "RUN_ID_ENV WINDOWS RANK_ENTRY PRELOAD_AND_RUN_TORCHRUN FRESH_AGENT "
        "MAX_PENDING_BYTES LAUNCH_LOG_ENV PER_RUN FORK_SAFE_CUDA_CHECK RunResult "
        "resolve_target torchrun_command RunTimedOut run_env torchrun"
    ),
    "zygote": (
        "ZYGOTE_ENV ROOM ROOM_ENV MAIN START_TIMEOUT_S Unavailable Agent Zygote start "
        "cpu_seconds"
    ),
    "zygote_main": ("serve AREAS blocks show_as"),
    "agent": ("method_name preload"),
    "rank_entry": (
        "RENAMED_COLLECTIVES run_target verify_report user_traceback student_line "
        "collective_of fail fresh_signals PASSED_ON STARTED_FRESH main watch run_rank"
    ),
    "rank_fresh": ("PIECE tagged relay main"),
    "rank_output": (
        "RANK_LINE MAX_LINE_CHARS MAX_RANK_BYTES LIBRARY_LOG MAX_AGENT_LINES NO_HOSTNAME "
        "RankOutput cut"
    ),
    "rank_records": ("record_failure record_signal_death forget_failure"),
    "failures": (
        "TAIL_LINES MAX_RECORDS LOST_PEER LaunchInterrupted LaunchError run_file "
        "read_json records issue_tokens raise_if_unfinished raise_if_failed last_lines "
        "crash_lines MISMATCH explain signal_deaths recorded_deaths root_cause FRAME "
        "LIBRARY DUMP_START library_frame where_stuck before_dump timeout_message"
    ),
    "lifetime": ("PR_SET_PDEATHSIG die_with_parent PR_SET_NAME RANK_NAME name_rank"),
    "lifeline": ("POLL_S PIDS note_pid hold kill_self hold_agent"),
    "run_processes": (
        "RUN_ID_ENV RANK_ROLE SAME_START_S noted by_environment family ranks ask_where "
        "stop"
    ),
    "start_method": ("START_ENV chosen described"),
    "dist": (
        "REPORT_DIR_ENV TIMEOUT_ENV BACKEND_ENV DEVICE_ENV INIT_BARRIER_ENV "
        "DEFAULT_COLLECTIVE_TIMEOUT_S Rank env_int this_rank choose_backend choose_device "
        "collective_timeout setup device_note teardown report take_token finish_mark "
        "mark_finished write_atomically flush_streams"
    ),
    "cluster": ("multinode_command free_port nodes_on_this_machine slurm_script"),
    "ddp": "broadcast_params average_gradients all_reduce_flat OverlappedAllReduce",
    "collectives": "chunks neighbours exchange record ring_reduce_scatter ring_all_gather ring_all_reduce parameter_server_all_reduce",
    "comm": "POINT_TO_POINT COLLECTIVES SAME_AS Event tensor_bytes CommMeter",
    "inflight": "HELD OTHERS Handle RECORDED sequence_number every_group_count InFlight",
    "bucket_events": (
        "SHOWN PHASES GRAD_WORDS expected_buckets arrivals expected listed described check_once check_buckets why check_overlap in_flight_problems check_waits gradient_problems parity_hint timeline"
    ),
    "zero_events": (
        "RS STATE PIECE_WORDS padded in_words as_reduced expected first_problems parity_problems layout_problems master_problem state_problems state_and_layout bucket_problems overlap_problems early_problems traffic_problems timeline"
    ),
    "zero_held": (
        "moment bounds limit retire_problems when_retired last_grad RETIRED retired stale_words held_problems peak"
    ),
    "zero_probe": (
        "RS NUMBERED ALL_GATHER MEANS padded ordered optimizer_state state_bytes find_optimizer identify describe rank_gradients held parse fits piece_verdicts same verdict traffic difference"
    ),
    "zero3_events": (
        "GATHER REDUCE padded unit_sizes blocks listed check_parity unwaited check_groups check_kept check_peak sent expected_sent check_traffic check_forward check_backward prefetch timeline"
    ),
    "zero3_record": (
        "TORCH_FORBIDDEN HELD RecordedAdamW pieces torch_fsdp_used layout same owner step_events kept"
    ),
    "capstone_checks": (
        "first_parting curve_problems clip_problems expected_kept kept_problems target_problems resume_problems"
    ),
    "capstone_resume": (
        "KILLED_RANK folder_of_this_launch committed checkpoint load_last resume"
    ),
    "freed": (
        "FreedStorage freed storage_key readable rebound Names guard_units METADATA FreedGuard PASSING FreedCalls"
    ),
    "models": "GPTConfig SelfAttention Block sinusoidal_positions GPT next_token_loss random_batch",
    "text": "LEFT_OUT_DIRS ONE_PLATFORM HELD_OUT_BELOW stdlib_files held_out load batch ngram_bits_per_byte",
    "training": "rank_batch flat_weights train_step timed_steps",
    "training_methods": "LR BUCKET_NUMEL Method zero_redundancy zero3 METHODS groups_of clip",
    "precision": "MixedPrecisionAdamW param_groups zero_grads",
    "measure": "storage_key plain attributes unique_bytes view_key num_params StateBytes optimizer_tensors model_state_bytes cuda_memory SavedTensors saved_activations activation_bytes LiveBytes adamw_elements_per_second",
    "parity": "REDUCTIONS Done rank_order_sum ordered_all_reduce ordered_reduce_scatter ordered_sums ordered_comm_hook unit_roundoff gamma norm_bound",
    "recompute": "Checkpointed checkpoint_blocks recompute_attention_scores",
    "sharded_checkpoint": "latest save load sha256 state_digests",
    "capstone_train": "LN2 CONFIG GLOBAL_BATCH LR WARMUP CLIP OPTIONS EVAL_BATCHES learning_rate optimizer_groups next_byte_loss rank_rows clip_in_piece_order held_out_bits sample train",
    "answers": "folded answer",
    "glue": "glue",
    "saved": "RESULTS result",
    "gpu_record": "MISSING GpuRecord latest allocator_rows capstone_prediction capstone_rows",
    "graded_rank": "GRADED_ENV PR_SET_DUMPABLE PR_SET_NO_NEW_PRIVS PR_SET_SECCOMP SECCOMP_MODE_FILTER CLONE_THREAD X32_SYSCALL_BIT ARCHES ALLOW ERRNO LD_W_ABS JEQ_K JGE_K JSET_K RET_K NR ARCH ARG0 wanted no_new_process_filter undumpable confine",
    "report_guard": "TamperError guard check written verify_written",
    "witness": "WITNESS_FD_ENV MAX_BYTES RECORD_KEY send collect mark take_token seal witnessed parsed check",
    "untrusted": "READ_FLAGS WRITE_FLAGS KINDS UntrustedFile kind open_regular read_bytes read_text read_json write_fresh tree_problem copy_tree",
}

CHECK = """
import importlib, json, sys
first, names = sys.argv[1], json.loads(sys.argv[2])


def check(olds):  # imported first by the name given: the old one, or the new one
    import zerobook as zb
    from zerobook._moved import MOVED

    for old in olds:
        a = importlib.import_module("zerobook." + (old if first == "old" else MOVED[old]))
        b = importlib.import_module("zerobook." + (MOVED[old] if first == "old" else old))
        assert a is b, (a, b)
        assert getattr(zb, old) is a and sys.modules["zerobook." + old] is a
        assert a.__name__ == a.__spec__.name == "zerobook." + MOVED[old], (a.__name__, a.__spec__.name)
        missing = [n for n in names[old].split() if not hasattr(a, n)]
        assert not missing, (old, missing)


if first == "new" or len(names) == 1:  # "new": one process for all
    check(list(names))
else:  # "old": each old name imported before any other part of zerobook, in a process of its own
    import torch, matplotlib.pyplot  # noqa: F401  (loaded once, shared by the forks: not zerobook)
    import os, traceback
    assert not [m for m in sys.modules if m.startswith("zerobook")]
    for old in names:
        pid = os.fork()
        if pid == 0:
            try:
                check([old])
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0, old
print("ok")
"""


def check(first: str, olds) -> str:
    names = json.dumps({old: OLD_NAMES[old] for old in olds})
    out = subprocess.run(
        [sys.executable, "-c", CHECK, first, names],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() + out.stderr[-1500:]


def test_every_old_name_is_its_new_module_imported_once_with_all_its_names():
    """Imported first by its old name (each in a process of its own, forked where the platform
    forks from one that has loaded torch but no part of zerobook: what a reader's old code does
    first), and after its new name (one process for all)."""
    assert set(OLD_NAMES) == set(MOVED)
    if hasattr(os, "fork"):
        assert check("old", list(MOVED)) == "ok"
    else:
        for old in MOVED:
            assert check("old", [old]) == "ok", old
    assert check("new", list(MOVED)) == "ok"


def test_a_name_that_no_part_of_a_split_module_has_is_still_an_attribute_error():
    code = (
        "import zerobook.plots as p\n"
        "try:\n    p.no_such_chart\nexcept AttributeError as e:\n    print(e)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True
    )
    assert "'zerobook.figures.charts' has no attribute 'no_such_chart'" in out.stdout
    assert set(SPLIT) <= {MOVED[old] for old in MOVED}


def test_python_m_runs_an_old_name():
    out = subprocess.run(
        [sys.executable, "-m", "zerobook.gpu_plots"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
