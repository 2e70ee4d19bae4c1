"""What more than one lab's careless class replaces (tests/test_careless.py)."""

LAST_BUCKET = "        if self.bucket:\n            self.launch()\n"
DDP_CAT = "        flat = torch.cat([p.grad.reshape(-1) for p in self.bucket])\n"
DDP_DIV = "            flat.div_(dist.get_world_size())\n"
DDP_HOOK = "param.register_post_accumulate_grad_hook(self.on_grad)"
NOT_CHECKED = "not checked (every step is needed): the run failed at step"
