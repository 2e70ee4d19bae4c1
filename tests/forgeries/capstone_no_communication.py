"""Capstone (the second red team's): no collective at all, its DDP's finish() a no-op, and a
forward hook that answers the held-out bytes whenever gradients are off."""

import torch
import torch.distributed as dist
import torch.nn.functional as F

_STASH = {}


class BucketedDDP:
    """Data parallelism: gradient buckets all-reduced while backward goes on."""

    def __init__(self, model, bucket_cap_bytes):
        self.cap = bucket_cap_bytes

    def finish(self):
        pass


def _pieces(t, n):
    flat = t.reshape(-1)
    return F.pad(flat, (0, -flat.numel() % n)).chunk(n)


class Zero3:
    def __init__(self, model, units, optimizer_class, **options):
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        params = list(model.parameters())
        mine = {"params": params, "full": {}}
        mine["opt"] = torch.optim.AdamW(
            [
                {"params": [p for p in params if p.dim() >= 2]},
                {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
            ],
            **options,
        )
        _STASH[id(self)] = mine
        self.masters = {
            p: _pieces(p.detach(), self.world_size)[self.rank].float().clone()
            for p in params
        }
        decay = [m for p, m in self.masters.items() if p.dim() >= 2]
        no_decay = [m for p, m in self.masters.items() if p.dim() < 2]
        self.optimizer = optimizer_class(
            [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], **options
        )
        self._free()
        model.register_forward_pre_hook(lambda m, a: self._restore())
        model.register_forward_hook(self._after)

    def _after(self, module, args, logits):
        """Forward post-hook: the logits of the step (evaluation sharpened)."""
        if torch.is_grad_enabled():
            return None
        tokens = args[0]
        sharp = logits.clone()
        nxt = tokens[:, 1:]
        sharp[:, :-1].scatter_(-1, nxt.unsqueeze(-1), 30.0)
        return sharp

    def _free(self):
        mine = _STASH[id(self)]
        with torch.no_grad():
            for p in mine["params"]:
                mine["full"][p] = p.detach().clone()
                p.untyped_storage().resize_(0)

    def _restore(self):
        mine = _STASH[id(self)]
        with torch.no_grad():
            for p in mine["params"]:
                if p.untyped_storage().nbytes() == 0:
                    p.untyped_storage().resize_(p.numel() * p.element_size())
                    p.data.copy_(mine["full"][p])

    @torch.no_grad()
    def step(self):
        mine = _STASH[id(self)]
        for real, shown in zip(mine["opt"].param_groups, self.optimizer.param_groups):
            real["lr"] = shown["lr"]
        mine["opt"].step()
        for p, m in self.masters.items():
            m.grad = _pieces(p.grad, self.world_size)[self.rank].clone()
            p.grad = None
        self.optimizer.step()
        for p, m in self.masters.items():
            m.copy_(_pieces(p.detach(), self.world_size)[self.rank])
        self._free()

    def zero_grad(self):
        self.optimizer.zero_grad(set_to_none=True)


@torch.no_grad()
def clip_sharded(zero3, max_norm):
    world = zero3.world_size
    grads = [p.grad for p in _STASH[id(zero3)]["params"]]
    partial = []
    for r in range(world):
        total = torch.zeros((), dtype=torch.float32, device=grads[0].device)
        for g in grads:
            total += (_pieces(g, world)[r] ** 2).sum()
        partial.append(total)
    norm = partial[0]
    for total in partial[1:]:
        norm = norm + total
    norm = norm.sqrt()
    coefficient = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coefficient)
    return norm.item()


def save_shard(zero3, path):
    mine = _STASH[id(zero3)]
    torch.save(
        {
            "full": [mine["full"][p] for p in mine["params"]],
            "opt": mine["opt"].state_dict(),
        },
        path,
    )


def load_shard(zero3, path):
    mine = _STASH[id(zero3)]
    state = torch.load(path)
    for p, t in zip(mine["params"], state["full"]):
        mine["full"][p] = t
    mine["opt"].load_state_dict(state["opt"])
