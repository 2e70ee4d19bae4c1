"""Every DDP rank holds all 16Ψ: one mixed-precision AdamW step under DDP, model states measured.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.memory_ddp

Each rank reports the bytes of its parameters, gradients and optimizer state, counted from its
live tensors (and, on a GPU, the CUDA allocator's figures), and the bytes of DDP's all-reduce
buckets that no gradient shares (a comm hook records each bucket's buffer, then all-reduces it as
DDP's default hook does). The step runs twice from the same weights: with
gradient_as_bucket_view=True (the gradients are views into the buckets: no extra bytes; the
top-level report) and with PyTorch's default, False (`default`: the buckets are a second copy of
the gradients, 2Ψ more in bf16).
"""

import torch
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

import zerobook as zb
from zerobook.train import measure
from zerobook.train.models import GPT, GPTConfig, next_token_loss, random_batch
from zerobook.train.precision import MixedPrecisionAdamW


def recording_hook(buffers: dict):
    """DDP's default all-reduce hook (average of each bucket's flat buffer), recording the buffer."""

    def hook(process_group, bucket):
        buffers[bucket.index()] = bucket.buffer()
        return allreduce_hook(process_group, bucket)

    return hook


def one_step(me: zb.Rank, bucket_view: bool) -> dict:
    """One DDP step of the bf16 GPT with mixed-precision AdamW; the bytes this rank then holds."""
    torch.manual_seed(0)
    model = GPT(GPTConfig()).to(device=me.device, dtype=torch.bfloat16)
    ddp = DistributedDataParallel(
        model, gradient_as_bucket_view=bucket_view
    )  # broadcasts rank 0's weights
    buffers: dict = {}
    ddp.register_comm_hook(None, recording_hook(buffers))
    optimizer = MixedPrecisionAdamW(model.parameters())
    batch = random_batch(model.config, 4, seed=me.rank).to(
        me.device
    )  # each rank its own data
    loss = next_token_loss(ddp, batch)
    loss.backward()  # DDP all-reduces the gradients, bucket by bucket, during backward
    optimizer.step()
    seen: set = set()
    states = measure.model_state_bytes(model, optimizer, seen)
    return {
        "params": states.params,
        "grads": states.grads,
        "optimizer": states.optimizer,
        "buckets": measure.unique_bytes(buffers.values(), seen),
        "loss": loss.item(),
        "cuda": measure.cuda_memory(),
        "first_weight": model.embed.weight[0, :4].float().tolist(),
        "num_params": measure.num_params(model),
    }


def main() -> None:
    me = zb.setup()
    report = one_step(me, bucket_view=True)
    report["default"] = one_step(me, bucket_view=False)
    zb.report(**report)


if __name__ == "__main__":
    main()
