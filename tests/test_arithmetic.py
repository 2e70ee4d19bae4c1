"""Parity that holds on any machine: every comparison of the course's trainings asserts the same
bits (zerobook.parity), so it cannot drift with the CPU. Proved here on more than this CPU's
arithmetic: the parity checks run again with the settings that change which kernels torch's CPU
backend and MKL use — as a different CPU would — and must still end with DDP's bits."""
import pytest
import torch

import zerobook as zb
from conftest import TARGETS

pytestmark = pytest.mark.launch  # starts ranks with torchrun (make test-quick leaves it out)

CAPABILITIES = ["default", "avx2", "avx512"]  # ATen's kernel families, from oldest to newest


def supported(capability: str) -> bool:
    """ATen can run a capability at or below the one this CPU has."""
    have = torch.backends.cpu.get_cpu_capability().lower()
    order = [c for c in CAPABILITIES if c != "default"]
    return capability == "default" or (have in order and order.index(capability) <= order.index(have))


def skip_reason(capability: str) -> str | None:
    """Why a capability is not run here: the CPU lacks it, or it is this CPU's own (every other
    parity test of the suite already runs those kernels)."""
    if not supported(capability):
        return f"this CPU lacks {capability}"
    if capability == torch.backends.cpu.get_cpu_capability().lower():
        return f"{capability} is this CPU's own: every other parity test runs it"
    return None


SETTINGS = [pytest.param({"ATEN_CPU_CAPABILITY": c}, [], id=f"ATEN_CPU_CAPABILITY={c}",
                         marks=pytest.mark.skipif(skip_reason(c) is not None, reason=skip_reason(c) or ""))
            for c in CAPABILITIES]
SETTINGS += [pytest.param({"MKL_CBWR": "COMPATIBLE"}, [], id="MKL_CBWR=COMPATIBLE"),  # MKL's generic code path
             pytest.param({}, ["--flush-denormal"], id="flush-denormal")]


@pytest.mark.parametrize("env, args", SETTINGS)
def test_every_parity_check_gives_ddps_bits_under_another_cpus_kernels(env, args):
    run = zb.torchrun(TARGETS / "arithmetic.py", nproc=4, echo=False, env=env, args=args)
    for report in run.ranks:
        if "ATEN_CPU_CAPABILITY" in env:
            assert report["capability"].lower() == env["ATEN_CPU_CAPABILITY"]  # it took effect
        assert report["diffs"] and all(d == 0.0 for d in report["diffs"].values()), report["diffs"]
        assert all(report["losses_equal"].values())
