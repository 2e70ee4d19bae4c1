"""ZeRO-3 against FSDP2 on four ranks. The schedule's own checks — prefetching changes when units
are gathered, never the result; the events show the overlap, the bytes of full parameters the cost,
the Chrome trace our phases — are asserted by the prefetch chapter's cells on the run it shows
(nbval runs them): one launch instead of the same one twice."""

import pytest

import zerobook as zb
from zerobook.train.models import GPT
from zerobook.runs.fsdp2_side_by_side import model_config

pytestmark = (
    pytest.mark.launch
)  # starts ranks with torchrun (make test-quick leaves it out)
TENSORS = len(
    list(GPT(model_config()).parameters())
)  # parameter tensors of the run's model


def test_ours_and_fsdp2_train_alike_and_send_the_same_bytes_on_four_ranks():
    """With every sum in rank order, ours and FSDP2 end with DDP's bits at every step (on 2 ranks
    the ZeRO-3 chapter's cells assert the same, in fp32 and in bf16; nbval runs them)."""
    world_size = 4
    run = zb.torchrun(
        "zerobook.runs.fsdp2_side_by_side",
        nproc=world_size,
        echo=False,
        args=["--steps", "10"],
    )
    for report in run.ranks:
        runs = report["runs"]
        for method in ("ours", "fsdp2"):
            assert runs[method]["diff"] == 0.0, (method, runs[method]["diff"])
            assert runs[method]["losses"] == runs["ddp"]["losses"]
        traffic = {
            m: {op: (e["calls"], e["bytes"]) for op, e in runs[m]["traffic"].items()}
            for m in ("ours", "fsdp2")
        }
        assert traffic["ours"] == traffic["fsdp2"]
        # 16 bytes per parameter over N each, above it only padding to N equal pieces (< N elements
        # of 16 bytes per unit for ours, per tensor for FSDP2) and AdamW's step counters (4 bytes a tensor)
        share = 16 * report["num_params"] / world_size
        slack = (16 * (world_size - 1) + 4) * TENSORS
        assert all(
            share <= runs[m]["kept_bytes"] <= share + slack for m in ("ours", "fsdp2")
        ), {m: runs[m]["kept_bytes"] - share for m in ("ours", "fsdp2")}
