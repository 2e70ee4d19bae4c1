"""A graded rank (zerobook.trust.graded_rank): it cannot start a process, its peers cannot read its
memory, and a report another process of the run rewrote is refused (zerobook.launcher.dist.finish_mark).
Each launch gives its ranks the grading sandbox's switch (GRADED_ENV) without the sandbox, so
this holds wherever the labs are graded; the peer's memory is checked inside the sandbox (as
root, outside it, every process may read every other's)."""

import platform
import sys

import pytest

import zerobook as zb
from conftest import ROOT
from zerobook.trust.graded_rank import ARCHES, GRADED_ENV, no_new_process_filter

# grading's sandbox switch on launched ranks: make test-grading
pytestmark = [pytest.mark.launch, pytest.mark.slow]
TARGET = ROOT / "tests" / "targets" / "graded_peer.py"
linux = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() not in ARCHES,
    reason="seccomp on Linux x86-64 or arm64 only",
)


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_the_filter_is_whole_instructions_and_ends_by_returning(machine):
    program = no_new_process_filter(machine)
    assert len(program) % 8 == 0 and program[-8:-6] == b"\x06\x00"  # BPF_RET | BPF_K


@linux
def test_a_graded_rank_starts_no_process_and_its_threads_still_run():
    graded = zb.torchrun(TARGET, nproc=2, echo=False, env={GRADED_ENV: "1"})
    plain = zb.torchrun(TARGET, nproc=2, echo=False)
    assert [r["forked"] for r in graded.ranks] == ["refused"] * 2
    assert [r["forked"] for r in plain.ranks] == ["started"] * 2


@linux
def test_a_report_rewritten_by_a_peer_is_refused():
    with pytest.raises(
        zb.LaunchError, match="rank 0's report was changed after rank 0 wrote it"
    ):
        zb.torchrun(
            TARGET, nproc=2, echo=False, args=["--rewrite"], env={GRADED_ENV: "1"}
        )


@linux
def test_inside_the_sandbox_a_peer_cannot_read_a_graded_ranks_memory(
    tmp_path, monkeypatch
):
    from grading_helpers import sandbox_or_not

    if sandbox_or_not():
        pytest.skip("bubblewrap does not work here")
    from zerobook.classroom.sandbox import RankSandbox

    monkeypatch.chdir(tmp_path)
    script = tmp_path / TARGET.name  # the sandbox sees this folder, not the tests'
    script.write_text(TARGET.read_text())
    run = zb.torchrun(script, nproc=2, echo=False, sandbox=RankSandbox([tmp_path]))
    assert [r["peer_memory"] for r in run.ranks] == ["refused"] * 2
    assert [r["forked"] for r in run.ranks] == ["refused"] * 2
