"""The ring all-reduce lab's (Lab 3) harness against wrong student code: a correct answer sent
the wrong way, a deadlocked ring, the right bytes sent to the wrong places, a ring that never
waits, one reduce-scatter step too many."""

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
    assert "a deadlock; post both at once" in message  # not the size's hint (a trial's)
    assert "torch.chunk" not in message
    send_line = (
        BLOCKING_RING.splitlines().index(
            "    dist.send(tensor, dst=(rank + 1) % world_size)"
        )
        + 1
    )
    assert f'File "{student}", line {send_line}' in message  # the student's own line


def from_reference(*pairs) -> str:
    """The reference ring with each (old, new) replaced (each old must occur)."""
    from conftest import ROOT

    text = (ROOT / "labs" / "ring_allreduce" / "ring_student.py").read_text()
    for old, new in zip(pairs[::2], pairs[1::2]):
        assert old in text, old
        text = text.replace(old, new)
    return text


WAIT = "        for work in dist.batch_isend_irecv(ops):\n            work.wait()\n"
WRONG_INDEX = (
    "parts[(rank + 1 - step) % world_size], parts[(rank - step) % world_size]",
    "parts[(rank - step) % world_size], parts[(rank - step - 1) % world_size]",
)


def test_a_ring_with_a_wrong_index_keeps_its_bytes_and_says_which_chunk(tmp_path):
    student = tmp_path / "ring_student.py"
    student.write_text(from_reference(*WRONG_INDEX))
    run = zb.grading.run_part("ring_allreduce", str(student), "bytes", nproc=3)
    for report in run.ranks:  # the right bytes, to the wrong places
        assert report["sent"] == 2 * 2 * report["size_bytes"] // 3
        assert not report["correct"]
    run = zb.grading.run_part("ring_allreduce", str(student), "correct", nproc=3)
    said = run.ranks[1]["wrong"]
    assert said.startswith("on 1001 float32 elements: after the all-gather, chunk ")
    assert "of rank 1 holds" in said and "not the sum of all 3 ranks' values" in said


def test_a_ring_that_never_waits_is_named_at_its_line_and_keeps_its_bytes(tmp_path):
    student = tmp_path / "ring_student.py"
    text = from_reference(WAIT, "        dist.batch_isend_irecv(ops)\n")
    student.write_text(text)
    line = text.splitlines().index("        dist.batch_isend_irecv(ops)") + 1
    run = zb.grading.run_part("ring_allreduce", str(student), "bytes", nproc=2)
    assert [r["sent"] for r in run.ranks] == [run.ranks[0]["size_bytes"]] * 2
    with pytest.raises(zb.LaunchError) as caught:  # not stuck: drained, then named
        zb.grading.run_part("ring_allreduce", str(student), "correct", nproc=2)
    first = str(caught.value).splitlines()[0]
    assert "returned without waiting on" in first
    assert f"line {line} of your file: dist.batch_isend_irecv(ops)" in first


def test_one_reduce_scatter_step_too_many_is_right_but_sends_a_chunk_more(tmp_path):
    student = tmp_path / "ring_student.py"
    student.write_text(
        from_reference(
            "    for step in range(world_size - 1):\n        send, recv",
            "    for step in range(world_size):\n        send, recv",
        )
    )
    run = zb.grading.run_part("ring_allreduce", str(student), "correct", nproc=3)
    assert all(all(r["cases"].values()) for r in run.ranks)
    run = zb.grading.run_part("ring_allreduce", str(student), "bytes", nproc=3)
    size = run.ranks[0]["size_bytes"]
    assert [r["sent"] for r in run.ranks] == [(2 * 2 + 1) * size // 3] * 3


def test_what_a_wrong_chunk_holds_is_said_for_the_phase_that_went_wrong():
    """zerobook.labs.ring_chunks on tensors made by hand (no launch): a reduce-scatter
    that left rank 0 no full chunk, an all-gather that left one chunk partial."""
    import torch

    from zerobook.labs.ring_chunks import case_inputs, verdict

    inputs = case_inputs(3000, torch.float32, 3)
    total = sum(inputs)
    partial = inputs[0].clone()
    partial[1000:2000] += inputs[2][1000:2000]  # chunk 1 lacks rank 1's values
    said = verdict(partial, partial, inputs, rank=0, received=4)
    assert said == (
        "after its reduce-scatter (the first N - 1 = 2 steps) rank 0 holds the full sum "
        "of no chunk: chunk 1 (the one a ring's rank 0 completes) holds the sum of ranks "
        "0, 2 (2 of the 3 ranks' values): work out on paper, for N = 4, which chunk rank r "
        "sends and which it receives and adds at step s"
    )
    after = total.clone()
    after[2000:] = float("nan")
    said = verdict(after, total, inputs, rank=2, received=4)
    assert said.startswith("after the all-gather, chunk 2 (1000 elements) of rank 2 ")
    assert said.endswith(
        "NaN (a received chunk read before its wait() returned), not the sum "
        "of all 3 ranks' values"
    )
    said = verdict(inputs[1] * 3, None, inputs, rank=1, received=0)
    assert said.startswith(
        "your ring made 0 receive(s) on rank 1; a ring makes 2(N - 1) = 4"
    )
