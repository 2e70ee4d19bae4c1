"""FSDP1 as one of the course's source articles sets it up, corrected, on the course's GPT.

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m zerobook.runs.fsdp1_article

The article's `setup_fsdp_model` uses `functools.partial` without importing functools and imports
`enable_wrap` and `wrap` without using them; here it is with those fixed and nothing else changed:
a size-based auto-wrap policy (every module of >= 10,000 parameters its own unit), CPUOffload of
the parameters, BACKWARD_PRE prefetch. Reported: the FSDP units, the loss of one step, the
collectives it issued. FSDP1 needs an accelerator: on a CPU-only host it raises at construction,
which the chapter shows.
"""

import functools

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.fully_sharded_data_parallel import (
    BackwardPrefetch,
    CPUOffload,
)
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.train.models import GPT, GPTConfig, next_token_loss
from zerobook.train.training import rank_batch

CONFIG = GPTConfig(vocab=128, hidden=64, layers=3, heads=4, seq_len=32)


def setup_fsdp_model(model, device_id):
    """The article's function, corrected (functools imported; nothing else changed)."""
    my_auto_wrap_policy = functools.partial(
        size_based_auto_wrap_policy, min_num_params=10000
    )
    return FSDP(
        model,
        auto_wrap_policy=my_auto_wrap_policy,
        cpu_offload=CPUOffload(offload_params=True),
        backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
        device_id=device_id,
    )


def main() -> None:
    me = zb.setup()
    torch.manual_seed(0)
    model = setup_fsdp_model(
        GPT(CONFIG), torch.device(me.device) if me.device != "cpu" else None
    )
    optimizer = torch.optim.AdamW(model.parameters())
    with CommMeter() as meter:
        loss = next_token_loss(model, rank_batch(CONFIG, 4, 0, me))
        loss.backward()
        optimizer.step()
    zb.report(
        loss=loss.item(),
        traffic=meter.summary(),
        units=[
            name or "root" for name, m in model.named_modules() if isinstance(m, FSDP)
        ],
    )


if __name__ == "__main__":
    main()
