"""FP8 weight gathers with FSDP2, as torchao's `enable_fsdp_float8_all_gather` makes them.

    python -m torch.distributed.run --standalone --nproc-per-node 3 -m zerobook.runs.fsdp2_float8

FSDP2 calls two methods of a parameter's local tensor when it has them (torch's
fsdp/_fully_shard/_fsdp_param.py): `fsdp_pre_all_gather` on the shard, before the all-gather,
returning the tensors to gather and some metadata; `fsdp_post_all_gather` after it, returning the
whole weight. torchao's WeightWithDynamicFloat8CastTensor (torchao/float8/fsdp_utils.py) casts the
shard to float8 e4m3 with one scale per weight, the largest magnitude of the whole weight (an
all-reduce MAX of each shard's) mapped to e4m3's largest number, 448; FSDP2 gathers one byte an
element, and the FP8 matmul (torch._scaled_mm, on Hopper, Ada and Blackwell GPUs) takes the bytes
and the scale as they are. `Float8Gathered` makes the same casts and collectives; no FP8 matmul
runs here, so its post-gather turns the bytes back into the compute dtype.

Reports, for the course's GPT in bf16 (one FSDP2 unit a block), with the blocks' Linear weights
gathered in bf16 and then in FP8: all-gather bytes and calls, all-reduces, the loss of each step.
"""

import torch
import torch.distributed as dist
import torch.utils._pytree as pytree

import zerobook as zb
from zerobook.data_parallel.comm import CommMeter
from zerobook.fsdp2 import shard_blocks
from zerobook.train.models import GPT, GPTConfig, next_token_loss
from zerobook.train.training import rank_batch

E4M3 = torch.float8_e4m3fn
CONFIG = GPTConfig(
    vocab=128, hidden=64, layers=3, heads=4, seq_len=32
)  # fsdp2_practice's
BATCH, STEPS = 4, 6
# the ops whose results stay a Float8Gathered: those FSDP2 applies to a shard (torchao's list)
KEEP = {
    torch.ops.aten.empty_like.default,
    torch.ops.aten.new_zeros.default,
    torch.ops.aten.slice.Tensor,
    torch.ops.aten.copy_.default,
    torch.ops.aten.view.default,
    torch.ops.aten.as_strided.default,
    torch.ops.aten._to_copy.default,
    torch.ops.aten._pin_memory.default,
    torch.ops.aten.split.Tensor,
    torch.ops.aten.clone.default,
}


class Float8Gathered(torch.Tensor):
    """A weight (fp32, as FSDP2 keeps its shard) that FSDP2 all-gathers in float8 e4m3."""

    @staticmethod
    def __new__(cls, tensor: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls,
            tensor.size(),
            strides=tensor.stride(),
            storage_offset=tensor.storage_offset(),
            dtype=tensor.dtype,
            device=tensor.device,
            requires_grad=tensor.requires_grad,
        )

    def __init__(self, tensor: torch.Tensor):
        self._tensor = tensor

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func == torch.ops.aten.detach.default:
            return Float8Gathered(args[0]._tensor)
        args, kwargs = pytree.tree_map_only(
            Float8Gathered, lambda t: t._tensor, (args, kwargs or {})
        )
        out = func(*args, **kwargs)
        if func not in KEEP:
            return out
        return pytree.tree_map_only(torch.Tensor, Float8Gathered, out)

    def __tensor_flatten__(self):
        return ["_tensor"], None

    @staticmethod
    def __tensor_unflatten__(inner, spec, outer_size, outer_stride):
        return Float8Gathered(inner["_tensor"])

    def fsdp_pre_all_gather(self, mesh, outer_size, outer_stride, module, mp_policy):
        """This rank's shard as e4m3 bytes to all-gather, zero rows added up to
        FSDP2's padded shard (ceil(rows / N) rows), and the weight's scale: 448 over
        its largest magnitude on any rank (all_reduce MAX of one fp32 number)."""
        amax = self._tensor.abs().max().float().clamp(min=1e-12)
        dist.all_reduce(amax, op=dist.ReduceOp.MAX, group=mesh.get_group())
        scale = torch.finfo(E4M3).max / amax
        rows = -(-outer_size[0] // mesh.size())
        shard = torch.zeros(rows, *outer_size[1:], dtype=E4M3, device=self.device)
        shard[: self._tensor.shape[0]] = (self._tensor.float() * scale).to(E4M3)
        return (shard,), (scale, outer_size[0])

    def fsdp_post_all_gather(self, outputs, metadata, param_dtype, *, out=None):
        """The gathered bytes, padding rows dropped, as the whole weight in the
        compute dtype (torchao keeps them in float8 for the FP8 matmul instead);
        the bytes are what FSDP2 frees after use."""
        (data,), (scale, rows) = outputs, metadata
        weight = (data[:rows].float() / scale).to(param_dtype)
        if out is not None:
            # every gather after the first refills the same storage with the same
            # weight: autograd's version check, which would call it a change, is
            # bypassed (torchao only sets the new scale on its FP8 tensor there)
            with torch.no_grad(), torch.autograd._unsafe_preserve_version_counter(out):
                out.copy_(weight)
            return None
        return weight, (data,)


def train(me, float8: bool) -> dict:
    """STEPS steps of AdamW; each step's collectives counted (rank 0's)."""
    torch.manual_seed(0)
    model = GPT(CONFIG)
    if float8:
        for linear in model.blocks.modules():
            if isinstance(linear, torch.nn.Linear):
                linear.weight = torch.nn.Parameter(Float8Gathered(linear.weight.data))
    shard_blocks(model, me, dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=False)
    losses = []
    for step in range(STEPS):
        with CommMeter() as meter:
            loss = next_token_loss(model, rank_batch(CONFIG, BATCH, step, me))
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    counted = meter.summary()  # the last step's
    return {
        "losses": losses,
        **{
            f"{op}_{what}": counted.get(op, {}).get(what, 0)
            for op in ("all_gather_into_tensor", "all_reduce", "reduce_scatter_tensor")
            for what in ("calls", "bytes")
        },
    }


def main() -> None:
    me = zb.setup()
    zb.report(bf16=train(me, float8=False), float8=train(me, float8=True))


if __name__ == "__main__":
    main()
