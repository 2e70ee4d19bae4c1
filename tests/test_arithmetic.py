"""Parity that holds on any machine: every comparison of the course's trainings asserts the same
bits (zerobook.train.parity), so it cannot drift with the CPU. Proved here on more than this CPU's
arithmetic: the parity checks run again with the settings that change which kernels torch's CPU
backend and MKL use — as a different CPU would — and must still end with DDP's bits."""

import pytest
import torch

import zerobook as zb
from conftest import TARGETS

pytestmark = (
    pytest.mark.launch
)  # starts ranks with torchrun (make test-quick leaves it out)

CAPABILITIES = [
    "default",
    "avx2",
    "avx512",
]  # ATen's kernel families, from oldest to newest


def supported(capability: str) -> bool:
    """ATen can run a capability at or below the one this CPU has."""
    have = torch.backends.cpu.get_cpu_capability().lower()
    order = [c for c in CAPABILITIES if c != "default"]
    return capability == "default" or (
        have in order and order.index(capability) <= order.index(have)
    )


def others() -> list[str]:
    """The capabilities this CPU can run other than its own (the rest of the suite runs that)."""
    own = torch.backends.cpu.get_cpu_capability().lower()
    return [c for c in CAPABILITIES if supported(c) and c != own] or ["default"]


# Each launch changes several things at once (one launch per capability): ATen's kernel family,
# MKL's code path (MKL_CBWR=COMPATIBLE: its generic one, as on another vendor's CPU) and
# denormals flushed to zero (as some CPUs and compilers default to).
SETTINGS = [
    (
        {
            "ATEN_CPU_CAPABILITY": c,
            **({"MKL_CBWR": "COMPATIBLE"} if i % 2 == 0 else {}),
        },
        ["--flush-denormal"] if i % 2 == 1 or len(others()) == 1 else [],
    )
    for i, c in enumerate(others())
]


def label(setting) -> str:
    env, args = setting
    return " ".join(
        [f"{k}={v}" for k, v in env.items()] + [a.lstrip("-") for a in args]
    )


@pytest.mark.parametrize("env, args", SETTINGS, ids=[label(s) for s in SETTINGS])
def test_every_parity_check_gives_ddps_bits_under_another_cpus_kernels(env, args):
    run = zb.torchrun(
        TARGETS / "arithmetic.py", nproc=3, echo=False, env=env, args=args
    )
    for report in run.ranks:
        assert (
            report["capability"].lower() == env["ATEN_CPU_CAPABILITY"]
        )  # it took effect
        assert report["diffs"] and all(d == 0.0 for d in report["diffs"].values()), (
            report["diffs"]
        )
        assert all(report["losses_equal"].values())


def test_the_settings_cover_every_kernel_family_mkls_generic_path_and_flushed_denormals():
    assert {s[0]["ATEN_CPU_CAPABILITY"] for s in SETTINGS} == set(
        others()
    ) and "default" in others()
    assert all(supported(c) for c in others())
    assert any(s[0].get("MKL_CBWR") == "COMPATIBLE" for s in SETTINGS)
    assert any("--flush-denormal" in s[1] for s in SETTINGS)
