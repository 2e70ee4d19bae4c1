"""Lab 5's careless class (ZeRO-3): CLASS[student] = (replacements, parts lost, words shown)."""

from careless.common import DDP_HOOK

Z3_FREE = "        for unit in self.params:\n            self.free(unit)\n"
CLASS = {
    "optimizer_over_full_parameters": (
        (
            "        decay = [m for p, m in self.masters.items() if p.dim() >= 2]\n"
            "        no_decay = [m for p, m in self.masters.items() if p.dim() < 2]\n",
            "        decay = [p for p, m in self.masters.items() if p.dim() >= 2]\n"
            "        no_decay = [p for p, m in self.masters.items() if p.dim() < 2]\n",
        ),
        "all",
        ["your optimizer was given embed.weight, the full parameter itself"],
    ),
    "prefetch_of_the_wrong_unit": (
        (
            "            self.gather(self.order[i + 1], async_op=True)\n",
            "            self.gather(self.order[i], async_op=True)\n",
        ),
        {"test_parity", "test_kept", "test_traffic", "test_forward"},
        ["was used (by torch's copy_) in step 1, forward after its storage was freed"],
    ),
    "unpadded_pieces": (
        (
            "return F.pad(flat, (0, -flat.numel() % self.world_size))"
            ".chunk(self.world_size)",
            "return flat.chunk(self.world_size)",
        ),
        "all",
        ["pad each flattened tensor with zeros to a multiple of the world size (3)"],
    ),
    "root_freed_after_its_forward": (
        (
            "        if i > 0:\n            self.free(self.order[i])\n",
            "        self.free(self.order[i])\n",
        ),
        "all",
        ["the root (embedding, final norm) stays gathered for the whole step"],
    ),
    "register_hook": (
        (DDP_HOOK, "param.register_hook(self.on_grad)"),
        "all",
        ["zero3_student.py, line", "register_post_accumulate_grad_hook(hook)"],
    ),
    "summed": (
        ("        out /= self.world_size\n", ""),
        {"test_parity"},
        ["the gradients' sum, not their mean: divide each reduce-scattered gradient"],
    ),
    "never_waits": (
        ("        if handle is not None:\n            handle.wait()\n", ""),
        {"test_parity", "test_forward", "test_backward"},
        ["all-gather was never waited on: wait on its handle before"],
    ),
    "rebinds_data": (  # a student trial's: free and gather by rebinding .data
        (
            "            p.untyped_storage().resize_(0)\n",
            "            p.data = torch.empty(0)\n",
            "            p.untyped_storage().resize_(p.numel() * p.element_size())\n",
            "            p.data = torch.empty(self.shape[p])\n",
            "        self.units = list(units)\n",
            "        self.units = list(units)\n"
            "        self.shape = {p: p.shape for p in model.parameters()}\n",
        ),
        "all",
        ["embed.weight's .data was rebound to another tensor (shape now [0])"],
    ),
    "divided_first": (  # a student trial's: DDP's habit
        (
            "        grads = [self.pieces(p.grad) for p in self.params[unit]]\n",
            "        grads = [self.pieces(p.grad / self.world_size) for p in self.params[unit]]\n",
            "        out /= self.world_size\n",
            "",
        ),
        {"test_parity"},
        ["gradients divided by the world size before the reduce-scatter summed them"],
    ),
    "never_frees": (
        ("            p.untyped_storage().resize_(0)\n", "            pass\n"),
        {"test_kept", "test_peak"},
        ["is still gathered after step()"],
    ),
}
