"""Lab 4's careless class (ZeRO-1 and 2): CLASS[student] = (replacements, parts lost, words shown)."""

from careless.common import DDP_HOOK

Z2_DIV = "            self.pieces[param].grad = grad.float() / self.n\n"
CLASS = {
    "all_reduces_the_full_gradients": (  # issue 64: every test needs the idea (DDP's way)
        (
            "        out = flat.new_empty(flat.numel() // self.n)\n"
            "        work = dist.reduce_scatter_tensor(out, flat, async_op=True)\n",
            "        out = flat.view(self.n, -1)[self.rank]  # its pieces, once summed\n"
            "        work = dist.all_reduce(flat, async_op=True)\n",
        ),
        {"test_buckets", "test_overlap", "test_traffic"},  # its memory is ZeRO-2's
        ["elements all-reduced: reduce-scatter them instead", "in no reduce-scatter"],
    ),
    "register_hook": (
        (DDP_HOOK, "param.register_hook(self.on_grad)"),
        "all",
        ["zero_student.py, line", "register_post_accumulate_grad_hook(hook)"],
    ),
    "unpadded": (
        (
            "    return torch.cat([flat, flat.new_zeros(-flat.numel() % world_size)])\n",
            "    return flat\n",
        ),
        "all",
        ["pad it with zeros to a multiple of the world size (3) first"],
    ),
    "summed": (
        (Z2_DIV, Z2_DIV.replace(" / self.n", "")),
        {"test_parity", "test_overlap"},
        ["holds the sum of the ranks' gradients, not their mean"],
    ),
    "waits_at_once": (
        (
            "        work = dist.reduce_scatter_tensor(out, flat, async_op=True)\n",
            "        work = dist.reduce_scatter_tensor(out, flat, async_op=True)\n"
            "        work.wait()\n",
        ),
        {"test_overlap"},
        ["was waited on at once, before any later gradient arrived"],
    ),
    "decay_on_1d": (
        (
            '        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]\n',
            '        groups = [{"params": decay + no_decay}]\n',
        ),
        {"test_parity"},
        ["weight decay on 1-D tensor(s) blocks.0.ln1.weight"],
    ),
    "never_retires": (
        (
            "        if len(self.in_flight) >= self.max_in_flight:\n"
            "            self.retire()\n",
            "",
        ),
        {"test_held"},
        ["it was retired only in finish()"],
    ),
    "retires_early": (
        (
            "        if len(self.in_flight) >= self.max_in_flight:\n",
            "        if self.in_flight:\n",
        ),
        {"test_overlap"},
        ["before the launch that retires it"],
    ),
    "one_rank_raises": (
        (
            "        while self.in_flight:\n",
            "        self.k = getattr(self, 'k', 0) + 1\n"
            "        if self.rank == 2 and self.k == 2:\n"
            "            raise RuntimeError('rank 2 alone')\n"
            "        while self.in_flight:\n",
        ),
        {"test_parity", "test_state"},
        ["the run failed in the AdamW run's step 1, rank 2", "rank 2 alone"],
    ),
    "gather_keeps_padding": (  # issue 67: a crash in step() keeps what backward showed
        (
            "            param.copy_(full[: param.numel()].view_as(param))\n",
            "            param.copy_(full.view_as(param))\n",
        ),
        {"test_parity", "test_state"},
        [
            "the run failed in the AdamW run's step 0, in step(), rank",
            "in step: `param.copy_(full.view_as(param))`",
            "copy back its first p.numel() elements, cut from the padding",
        ],
    ),
    "strided_piece": (  # issue 67: a column of view(-1, N) named, not "no piece"
        (
            "padded(param.detach(), self.n).view(self.n, -1)[self.rank]",
            "padded(param.detach(), self.n).view(-1, self.n)[:, self.rank]",
        ),
        {"test_parity", "test_state"},
        [
            "masters of embed.weight, blocks.0.attn.qkv.weight, blocks.0.attn.proj.weight",
            "hold elements 0, 0 + N, 0 + 2N, ... of its parameter (every N-th element: "
            "a strided column): rank r's piece is elements [r x padded(p)/N, (r + 1) x "
            "padded(p)/N) of the padded, flattened parameter, a contiguous chunk",
        ],
    ),
}
