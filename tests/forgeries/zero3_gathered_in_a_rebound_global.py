"""Lab 5 (the second red team's): every gathered buffer kept in a module global rebound each
time (a new list, not the one the harness saw after construction)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F


_LANDED = []


class Zero3:
    """ZeRO-3 with FSDP2's layout: gather a unit before it computes, free it after."""

    def __init__(self, model, units, optimizer_class, **options):
        """units: the blocks, in forward order; every other parameter of `model` is
        the root's (the model's own unit, gathered for the whole step). Keep piece r of
        every parameter (fp32 master), free the full ones;
        optimizer_class(groups, **options) over the pieces, no weight decay on those of
        1-D parameters; forward pre- and post-hooks on the root and each unit, a
        post-accumulate-grad hook on every parameter."""
        ### BEGIN SOLUTION
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.units = list(units)
        owned = {id(p) for unit in self.units for p in unit.parameters()}
        self.params = {model: [p for p in model.parameters() if id(p) not in owned]}
        self.params |= {unit: list(unit.parameters()) for unit in self.units}
        self.masters = {
            p: self.pieces(p.detach())[self.rank].float().clone()
            for p in model.parameters()
        }
        for unit in self.params:
            self.free(unit)
        decay = [m for p, m in self.masters.items() if p.dim() >= 2]
        no_decay = [m for p, m in self.masters.items() if p.dim() < 2]
        self.optimizer = optimizer_class(
            [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], **options
        )
        self.in_flight, self.arrived = {}, {unit: 0 for unit in self.params}
        self.unit_of = {p: u for u, params in self.params.items() for p in params}
        self.order = [model, *self.units]  # the root's forward encloses the blocks'
        for i, unit in enumerate(self.order):
            unit.register_forward_pre_hook(lambda m, args, i=i: self.before_forward(i))
            unit.register_forward_hook(
                lambda m, a, out, i=i: self.after_forward(i, out)
            )
        for param in model.parameters():
            param.register_post_accumulate_grad_hook(self.on_grad)
        ### END SOLUTION

    def pieces(self, tensor):
        """The N equal pieces of `tensor`, flattened, zero-padded to a multiple of N."""
        ### BEGIN SOLUTION
        flat = tensor.reshape(-1)
        return F.pad(flat, (0, -flat.numel() % self.world_size)).chunk(self.world_size)
        ### END SOLUTION

    @torch.no_grad()
    def gather(self, unit, async_op=False):
        """Start the all-gather of `unit`'s pieces (piece r of each of its parameters,
        concatenated) into a buffer N times as long, rank-major; allocate the
        parameters' storage again. Keep the buffer and the handle for wait(); return
        the handle."""
        ### BEGIN SOLUTION
        pieces = torch.cat([self.masters[p] for p in self.params[unit]])
        buffer = pieces.new_empty(self.world_size * pieces.numel())
        for p in self.params[unit]:
            p.untyped_storage().resize_(p.numel() * p.element_size())
        handle = dist.all_gather_into_tensor(buffer, pieces, async_op=async_op)
        self.in_flight[unit] = (handle, buffer)
        return handle
        ### END SOLUTION

    @torch.no_grad()
    def wait(self, unit):
        """Once the unit's all-gather has landed (gathered now if none was started),
        copy each full parameter out of the buffer, through `param.data`. (A unit whose
        weights are already there, as the root's are in backward, needs no wait.)"""
        ### BEGIN SOLUTION
        if unit not in self.in_flight:
            self.gather(unit)
        handle, buffer = self.in_flight.pop(unit)
        global _LANDED
        _LANDED = _LANDED + [buffer]
        if handle is not None:
            handle.wait()
        rows, offset = buffer.view(self.world_size, -1), 0
        for p in self.params[unit]:
            n = self.masters[p].numel()
            p.data.copy_(
                rows[:, offset : offset + n].reshape(-1)[: p.numel()].view_as(p)
            )
            offset += n
        ### END SOLUTION

    def free(self, unit):
        """The unit's full parameters' storage back to 0 bytes."""
        ### BEGIN SOLUTION
        for p in self.params[unit]:
            p.untyped_storage().resize_(0)
        ### END SOLUTION

    def before_forward(self, i):
        """The forward pre-hook of unit i of [root, *units]: its weights; then start
        unit i+1's all-gather, asynchronously (forward prefetch)."""
        ### BEGIN SOLUTION
        self.wait(self.order[i])
        if i + 1 < len(self.order):
            self.gather(self.order[i + 1], async_op=True)
        ### END SOLUTION

    def after_forward(self, i, output):
        """Its forward post-hook: free unit i (a block; the root stays gathered); hook
        `output` so that before_backward(i) runs when its gradient is computed."""
        ### BEGIN SOLUTION
        if i > 0:
            self.free(self.order[i])
        if output.requires_grad:
            output.register_hook(lambda grad: self.before_backward(i))
        ### END SOLUTION

    def before_backward(self, i):
        """Before unit i's backward: its weights; then start the all-gather of the
        unit whose backward comes next (backward prefetch; after the root's: the last
        block)."""
        ### BEGIN SOLUTION
        if i > 0:
            self.wait(self.order[i])
        following = len(self.order) - 1 if i == 0 else i - 1
        if following > 0:
            self.gather(self.order[following], async_op=True)
        ### END SOLUTION

    @torch.no_grad()
    def on_grad(self, param):
        """The post-accumulate-grad hook. After the last gradient of param's unit: one
        reduce-scatter of the unit's gradients (padded, rank-major) divided by N into
        the pieces' .grad; the full gradients dropped, the unit freed."""
        ### BEGIN SOLUTION
        unit = self.unit_of[param]
        self.arrived[unit] += 1
        if self.arrived[unit] < len(self.params[unit]):
            return
        self.arrived[unit] = 0
        grads = [self.pieces(p.grad) for p in self.params[unit]]
        full = torch.cat(
            [torch.cat([g[r] for g in grads]) for r in range(self.world_size)]
        )
        out = full.new_empty(full.numel() // self.world_size)
        dist.reduce_scatter_tensor(out, full)
        out /= self.world_size
        for p, grad in zip(self.params[unit], out.split([g[0].numel() for g in grads])):
            self.masters[p].grad = grad.float()
            p.grad = None
        self.free(unit)
        ### END SOLUTION

    def step(self):
        """AdamW on the master pieces (the next forward gathers them)."""
        ### BEGIN SOLUTION
        self.optimizer.step()
        ### END SOLUTION

    def zero_grad(self):
        """The master pieces' gradients dropped."""
        ### BEGIN SOLUTION
        self.optimizer.zero_grad(set_to_none=True)
        ### END SOLUTION
