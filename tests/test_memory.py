"""zerobook.accounting.memory against the ZeRO paper's printed tables, the other conventions, and DeepSpeed."""

import subprocess
import sys

import pytest

from zerobook.accounting import activations, recipes, traffic
from zerobook.accounting import deepspeed_estimates as ds
from zerobook.accounting import memory as m
from zerobook.accounting import zero_paper as paper

STAGES_SHARDED = (1, 2, 3)


@pytest.mark.parametrize("model", paper.TABLE_1)
def test_table_1_per_device_memory_to_the_printed_precision(model):
    psi = paper.TABLE_1_MODELS[model]
    for world_size, printed in paper.TABLE_1[model].items():
        for stage, cell in zip(STAGES_SHARDED, printed):
            computed = (
                m.model_state_bytes(psi, stage=stage, world_size=world_size).total
                / m.GB
            )
            assert paper.agrees(computed, cell), (
                model,
                world_size,
                stage,
                computed,
                cell,
            )


def test_table_1_baseline_is_the_first_row_whatever_the_dp_degree():
    for model, psi in paper.TABLE_1_MODELS.items():
        for world_size in paper.TABLE_1[model]:
            baseline = (
                m.model_state_bytes(psi, stage=0, world_size=world_size).total / m.GB
            )
            assert paper.agrees(baseline, paper.TABLE_1[model][1][0])


def test_table_2_max_model_size_on_32_gb():
    """MP = 1 rows agree to the printed digit; the paper's MP > 1 rows are the MP = 1 value,
    rounded as printed, times MP, so they agree within MP times that rounding."""
    device = paper.TABLE_1_DEVICE_GB * m.GB
    mp1 = paper.TABLE_2[0][2]
    for mp, gpus, printed, _, _ in paper.TABLE_2:
        for stage, cell, base in zip(m.STAGES, printed, mp1):
            computed = m.max_model_params(
                device, stage=stage, world_size=gpus // mp, model_parallel=mp
            )
            tolerance = max(paper.last_digit(cell), mp * paper.last_digit(base) / 2)
            assert abs(computed - paper.value(cell)) <= tolerance, (
                mp,
                stage,
                computed,
                cell,
            )
            if "." in base and cell.endswith("B"):
                assert round(paper.value(base) * mp / 1e8) == round(
                    paper.value(cell) / 1e8
                )


def test_figure_1_example():
    example = paper.FIGURE_1
    for stage, cell in zip(m.STAGES, example["printed_gb"]):
        states = m.model_state_bytes(
            example["psi"], stage=stage, world_size=example["world_size"]
        )
        assert paper.agrees(states.total / m.GB, cell), (
            stage,
            states.total / m.GB,
            cell,
        )


def test_the_breakdown_shards_what_each_stage_says():
    psi, n = 1e9, 8
    rows = {row["stage"]: row for row in m.stage_table(psi, n)}
    assert (rows[0]["params"], rows[0]["grads"], rows[0]["optimizer"]) == (
        2 * psi,
        2 * psi,
        12 * psi,
    )
    assert (rows[1]["params"], rows[1]["grads"], rows[1]["optimizer"]) == (
        2 * psi,
        2 * psi,
        12 * psi / n,
    )
    assert (rows[2]["params"], rows[2]["grads"], rows[2]["optimizer"]) == (
        2 * psi,
        2 * psi / n,
        12 * psi / n,
    )
    assert rows[3]["total"] == 16 * psi / n


def test_reductions_approach_4x_and_8x_only_as_n_grows():
    def reduction(stage, n):
        return m.model_state_bytes(1, stage=stage, world_size=n).total

    assert 16 / reduction(1, 8) == pytest.approx(16 / 5.5)
    assert 16 / reduction(2, 64) == pytest.approx(16 / (2 + 14 / 64))
    assert 16 / reduction(1, 10**9) == pytest.approx(4, rel=1e-6)
    assert 16 / reduction(2, 10**9) == pytest.approx(8, rel=1e-6)


@pytest.mark.parametrize(
    "name, total",
    [
        ("zero_paper", 16),
        ("fp32_grad_accum", 20),
        ("fp32_grads", 18),
        ("params_and_adam_moments", 10),
    ],
)
def test_the_conventions_in_circulation(name, total):
    recipe = recipes.RECIPES[name]
    assert recipe.bytes_per_param == total
    assert (
        m.model_state_bytes(1e9, stage=0, world_size=1, **recipe.sizes()).total
        == total * 1e9
    )


def deepspeed_zero2(
    total_params,
    num_gpus_per_node=1,
    num_nodes=1,
    cpu_offload=True,
    additional_buffer_factor=1.5,
):
    """DeepSpeed's estimate_zero2_model_states_mem_needs, transcribed from its source
    (deepspeed/runtime/zero/stage_1_and_2.py at tag v0.19.5; the same since v0.14.3): the
    oracle, operation for operation."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def deepspeed_zero3(
    total_params,
    largest_layer_params,
    num_gpus_per_node=1,
    num_nodes=1,
    cpu_offload=True,
    cpu_offload_params=True,
    zero_init=True,
    additional_buffer_factor=1.5,
):
    """DeepSpeed's estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/stage3.py
    at tag v0.19.5), transcribed; it also returns largest_layer_memory, which ours leaves
    out."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = (
                    total_params
                    * max(4 * num_gpus_per_node, 18 * gpus_factor)
                    * additional_buffer_factor
                )
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            if zero_init:
                cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = (
                    total_params
                    * max(4 * num_gpus_per_node, 16 * gpus_factor)
                    * additional_buffer_factor
                )
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = (
                largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
            )
        else:
            cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


PSIS = [1e9, 7.5e9, 1_300_000_007, 175e9, 70_553_706_496, 123_456_789]
LAYOUTS = [(1, 1), (8, 1), (8, 3), (4, 7), (2, 64)]  # (GPUs per node, nodes)


@pytest.mark.parametrize("gpus, nodes", LAYOUTS)
def test_deepspeed_estimates_are_deepspeeds_to_the_byte(gpus, nodes):
    for psi in PSIS:
        for offload in (True, False):
            assert ds.deepspeed_zero2_estimate(
                psi, gpus_per_node=gpus, nodes=nodes, cpu_offload=offload
            ) == deepspeed_zero2(psi, gpus, nodes, offload)
            for params, init in (
                (True, True),
                (True, False),
                (False, True),
                (False, False),
            ):
                ours = ds.deepspeed_zero3_estimate(
                    psi,
                    psi / 37,
                    gpus_per_node=gpus,
                    nodes=nodes,
                    cpu_offload=offload,
                    cpu_offload_params=params,
                    zero_init=init,
                )
                assert ours == deepspeed_zero3(
                    psi, psi / 37, gpus, nodes, offload, params, init
                ), (psi, offload, params, init)


def test_deepspeed_estimates_default_to_deepspeeds_offloads():
    psi, layer = 1e9, 1e8
    assert ds.deepspeed_zero2_estimate(psi, gpus_per_node=8) == deepspeed_zero2(
        psi, 8
    )  # cpu_offload=True
    assert ds.deepspeed_zero2_estimate(psi, gpus_per_node=8) == (
        int(psi * 32 * 1.5),
        int(2 * psi),
    )
    assert ds.deepspeed_zero3_estimate(psi, layer) == (
        psi * 18 * 1.5,
        4 * layer,
    )  # both offloads on
    cpu, gpu = ds.deepspeed_zero2_estimate(psi, gpus_per_node=8, cpu_offload=False)
    assert gpu == 2 * psi + 18 * psi / 8 and cpu == psi * 4 * 8 * 1.5
    assert ds.deepspeed_label(2**30 * 3) == "3.00GB"  # GiB, labelled GB


def test_the_order_of_multiplication_is_deepspeeds():
    """175B parameters on 7 nodes: total * 18 * (1/7) * 1.5 (DeepSpeed, left to right) is
    675,000,000,000 bytes, total * (18 * (1/7)) * 1.5 one byte less. Ours must say DeepSpeed's."""
    psi = 175e9
    cpu, _ = ds.deepspeed_zero3_estimate(psi, 1, nodes=7)
    assert int(psi * (18 * (1 / 7)) * 1.5) == 674_999_999_999
    assert cpu == deepspeed_zero3(psi, 1, num_nodes=7)[0] == 675_000_000_000


def test_activation_memory_korthikanti():
    s, b, h, a = 2048, 1, 12288, 96
    full = activations.activation_bytes_per_layer(s, b, h, a)
    assert full == s * b * h * (34 + 5 * a * s / h)
    assert (
        activations.activation_bytes_per_layer(s, b, h, a, recompute=True)
        == 2 * s * b * h
    )
    assert full / (2 * s * b * h) == pytest.approx((34 + 5 * a * s / h) / 2)


def test_transformer_params_gpt2_small():
    # GPT-2 small: 124,439,808 parameters, of which 1024 x 768 are learned position embeddings,
    # which the formula leaves out.
    assert activations.transformer_params(768, 12, 50257) + 1024 * 768 == 124_439_808


def test_communication_per_step():
    psi, n = 1e9, 4
    ddp = traffic.comm_elements_per_step(psi, stage=0, world_size=n)
    assert ddp == {"all_reduce": 2 * psi * 3 / 4, "total": 2 * psi * 3 / 4}
    for stage in (1, 2):
        assert (
            traffic.comm_elements_per_step(psi, stage=stage, world_size=n)["total"]
            == ddp["total"]
        )
    zero3 = traffic.comm_elements_per_step(psi, stage=3, world_size=n)
    assert (
        zero3["all_gather"] == 2 * psi * 3 / 4 and zero3["total"] / ddp["total"] == 1.5
    )
    assert traffic.comm_elements_per_step(psi, stage=3, world_size=1)["total"] == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_params=0, stage=0, world_size=1), "num_params must be > 0"),
        (dict(num_params=-5, stage=0, world_size=1), "num_params must be > 0"),
        (
            dict(num_params=1e9, stage=0, world_size=0),
            "world_size must be an integer >= 1",
        ),
        (dict(num_params=1e9, stage=4, world_size=8), "stage must be one of"),
        (
            dict(num_params=1e9, stage=1, world_size=8, grad_bytes=-2),
            "grad_bytes must be >= 0",
        ),
    ],
)
def test_bad_input_says_what_was_wrong(kwargs, message):
    with pytest.raises(ValueError, match=message):
        m.model_state_bytes(**kwargs)
    with pytest.raises(ValueError, match="device_bytes must be > 0"):
        m.max_model_params(0, stage=0, world_size=1)


def test_command_line_prints_the_table():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "zerobook.accounting.memory",
            "--params",
            "7.5e9",
            "--world-size",
            "64",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "ZeRO-3 (P_os+g+p)" in out and "120.00" in out and "1.88" in out
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "zerobook.memory",  # the old name (zerobook/_moved.py)
            "--params",
            "-1",
            "--world-size",
            "64",
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "num_params must be > 0" in bad.stderr


def test_memory_needs_no_torch():
    code = (
        "import sys, zerobook.accounting.memory, zerobook.accounting.activations, "
        "zerobook.accounting.deepspeed_estimates, zerobook.accounting.traffic, "
        "zerobook.accounting.hardware, zerobook.accounting.zero_paper; "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_korthikantis_terms_add_up_to_the_formula():
    s, b, h, a = 512, 2, 1024, 16
    terms = activations.activation_terms(s, b, h, a)
    assert sum(terms.values()) == activations.activation_bytes_per_layer(s, b, h, a)
    assert set(activations.DROPOUT_TERMS) <= set(terms)
    dropout = sum(terms[k] for k in activations.DROPOUT_TERMS)
    assert dropout == 2 * s * b * h + 3 * a * s * s * b


def test_min_world_size():
    device = 60e9  # an 80 GB card with 20 GB kept for activations
    assert (
        m.min_world_size(70e9, device, stage=2) is None
    )  # 2 bytes x 70B replicated = 140 GB
    n = m.min_world_size(70e9, device, stage=3)
    assert m.model_state_bytes(70e9, stage=3, world_size=n).total <= device
    assert m.model_state_bytes(70e9, stage=3, world_size=n - 1).total > device
    assert m.min_world_size(1e9, device, stage=0) == 1
    assert m.min_world_size(7.5e9, 80e9, stage=0) is None
