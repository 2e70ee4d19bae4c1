"""Every DDP rank holds all 16Ψ: one mixed-precision AdamW step under DDP, model states measured.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.memory_ddp

Each rank reports the bytes of its parameters, gradients and optimizer state, counted from its
live tensors (and, on a GPU, the CUDA allocator's figures). DDP runs with
gradient_as_bucket_view=True, so its all-reduce buckets are the gradients; PyTorch's default
keeps the buckets apart and holds another 2Ψ.
"""
import torch
from torch.nn.parallel import DistributedDataParallel

import zerobook as zb
from zerobook import measure
from zerobook.models import GPT, GPTConfig, next_token_loss, random_batch
from zerobook.precision import MixedPrecisionAdamW


def main() -> None:
    me = zb.setup()
    torch.manual_seed(0)
    model = GPT(GPTConfig()).to(device=me.device, dtype=torch.bfloat16)
    ddp = DistributedDataParallel(model, gradient_as_bucket_view=True)  # broadcasts rank 0's weights
    optimizer = MixedPrecisionAdamW(model.parameters())
    batch = random_batch(model.config, 4, seed=me.rank).to(me.device)  # each rank its own data
    loss = next_token_loss(ddp, batch)
    loss.backward()  # DDP all-reduces the gradients during backward
    optimizer.step()
    states = measure.model_state_bytes(model, optimizer)
    zb.report(num_params=measure.num_params(model), params=states.params, grads=states.grads,
              optimizer=states.optimizer, loss=loss.item(), cuda=measure.cuda_memory(),
              first_weight=model.embed.weight[0, :4].float().tolist())


if __name__ == "__main__":
    main()
