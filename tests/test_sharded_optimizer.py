"""ShardedOptimizer is a torch.optim.Optimizer: LR schedulers drive every rank's shard, step takes
a closure, groups can be added later, and a consolidated state dict restores training bit for bit
(tests/targets/sharded_optimizer.py; every sum in rank order, so "the same" means the same bits)."""

import pytest

import zerobook as zb
from conftest import TARGETS

pytestmark = pytest.mark.launch


@pytest.mark.parametrize("world_size, scheduler", [(2, "lambda"), (4, "cosine")])
def test_a_scheduler_and_a_checkpoint_work_as_with_any_optimizer(
    tmp_path, world_size, scheduler
):
    run = zb.torchrun(
        TARGETS / "sharded_optimizer.py",
        nproc=world_size,
        echo=False,
        args=["--dir", tmp_path, "--scheduler", scheduler],
    )
    for report in run.ranks:
        assert (
            report["sharded_diff"] == 0.0
        )  # DDP + torch.optim.AdamW under the same scheduler
        for expected, stepped in zip(report["expected_lrs"], report["lrs"]):
            assert all(
                s is None or s == e for s, e in zip(stepped, expected)
            )  # the scheduler's lr
        assert report["resumed_diff"] == 0.0 and report["resumed_losses_equal"]
        assert (
            report["resumed_lrs"]
            == report["lrs"][len(report["lrs"]) - len(report["resumed_lrs"]) :]
        )
        assert report[
            "state_equal"
        ]  # consolidated: a plain AdamW's state dict, tensor for tensor
        assert all(loss > 0 for loss in report["closure_losses"])
    owned = run.ranks[0]["owned"]
    assert all(count > 0 for count in owned) and len(owned) == world_size


def test_state_dict_before_consolidating_says_what_to_do(monkeypatch):
    import torch

    from zerobook.zero import ShardedOptimizer

    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: 0)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 1)
    optimizer = ShardedOptimizer(
        [torch.nn.Parameter(torch.ones(3))], torch.optim.SGD, lr=0.1
    )
    assert (
        isinstance(optimizer, torch.optim.Optimizer)
        and optimizer.param_groups[0]["lr"] == 0.1
    )
    with pytest.raises(RuntimeError, match="consolidate_state_dict"):
        optimizer.state_dict()
