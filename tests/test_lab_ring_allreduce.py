"""The ring all-reduce lab's (Lab 3) harness against wrong student code: a correct answer sent
the wrong way, a deadlocked ring."""

import time

import pytest

import zerobook as zb

# starts ranks with torchrun; the labs' feedback on planted mistakes: make test-grading
pytestmark = [pytest.mark.launch, pytest.mark.slow]


GATHER_TO_RANK_0 = '''
import torch.distributed as dist

def ring_all_reduce(tensor):
    """Not a ring: everyone sends to rank 0, which sums and sends the total back."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        incoming = tensor.clone()
        for peer in range(1, world_size):
            dist.recv(incoming, src=peer)
            tensor.add_(incoming)
        for peer in range(1, world_size):
            dist.send(tensor, dst=peer)
    else:
        dist.send(tensor, dst=0)
        dist.recv(tensor, src=0)
'''


BLOCKING_RING = '''
import torch
import torch.distributed as dist

def ring_all_reduce(tensor):
    """Every rank sends before it receives, with blocking calls: a deadlock."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    incoming = torch.empty_like(tensor)
    dist.send(tensor, dst=(rank + 1) % world_size)
    dist.recv(incoming, src=(rank - 1) % world_size)
    tensor.add_(incoming)
'''


def test_gathering_to_rank_0_is_correct_but_fails_the_byte_count(tmp_path):
    student = tmp_path / "ring_student.py"
    student.write_text(GATHER_TO_RANK_0)
    run = zb.grading.run_part("ring_allreduce", str(student), "bytes", nproc=3)
    size = run.ranks[0]["size_bytes"]
    assert all(r["correct"] for r in run.ranks)
    assert run.ranks[0]["sent"] == 2 * size  # rank 0 sends the total to both others
    assert run.ranks[0]["sent"] != 2 * 2 * size // 3  # what a ring sends


def test_a_deadlocked_ring_fails_within_a_minute_naming_the_stuck_send(
    tmp_path, monkeypatch
):
    # The launcher's own test waits out the default collective timeout; 10 s is enough here.
    monkeypatch.setenv("ZEROBOOK_COLLECTIVE_TIMEOUT", "10")
    student = tmp_path / "ring_student.py"
    student.write_text(BLOCKING_RING)
    start = time.monotonic()
    with pytest.raises(zb.LaunchError) as caught:
        zb.grading.run_part("ring_allreduce", str(student), "bytes", nproc=2)
    assert time.monotonic() - start < 60
    message = str(caught.value)
    assert "stuck in send" in message.splitlines()[0]
    send_line = (
        BLOCKING_RING.splitlines().index(
            "    dist.send(tensor, dst=(rank + 1) % world_size)"
        )
        + 1
    )
    assert f'File "{student}", line {send_line}' in message  # the student's own line
