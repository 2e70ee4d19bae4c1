"""Lab 4 (the second red team's): retired buckets kept in an object whose class can be called
(the walk of what the student holds used to skip callables)."""

import torch
import torch.distributed as dist


def padded(tensor, world_size):
    """`tensor` flattened and zero-padded to a multiple of world_size (a new tensor)."""
    ### BEGIN SOLUTION
    flat = tensor.reshape(-1)
    return torch.cat([flat, flat.new_zeros(-flat.numel() % world_size)])
    ### END SOLUTION


class _Shelf:
    """Buckets already retired, kept for inspection."""

    def __init__(self):
        self.items = []

    def __call__(self):
        return self.items


class Zero2:
    """ZeRO-2 with FSDP2's layout: rank r owns piece r of every parameter."""

    def __init__(
        self, model, optimizer_class, bucket_cap_bytes, max_in_flight, **options
    ):
        """fp32 master pieces; optimizer_class over them in two groups (no weight decay
        on 1-D tensors); a post-accumulate-grad hook on every parameter; at most
        max_in_flight reduce-scatters in flight."""
        ### BEGIN SOLUTION
        self.n, self.rank = dist.get_world_size(), dist.get_rank()
        self.cap, self.params, self.pieces = (
            bucket_cap_bytes,
            list(model.parameters()),
            {},
        )
        for param in self.params:
            piece = padded(param.detach(), self.n).view(self.n, -1)[self.rank]
            self.pieces[param] = torch.nn.Parameter(piece.float().clone())
        decay = [self.pieces[p] for p in self.params if p.dim() > 1]
        no_decay = [self.pieces[p] for p in self.params if p.dim() <= 1]
        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
        self.optimizer = optimizer_class(groups, **options)
        self.bucket, self.bucket_bytes, self.in_flight = [], 0, []
        self.retired = _Shelf()
        self.max_in_flight = max_in_flight
        for param in self.params:
            param.register_post_accumulate_grad_hook(self.on_grad)
        ### END SOLUTION

    def on_grad(self, param):
        """param.grad holds this backward's gradient: into the open bucket, freed."""
        ### BEGIN SOLUTION
        grad = padded(param.grad, self.n)
        param.grad = None
        self.bucket.append((param, grad))
        self.bucket_bytes += grad.numel() * grad.element_size()
        if self.bucket_bytes >= self.cap:
            self.launch()
        ### END SOLUTION

    def launch(self):
        """Start the open bucket's asynchronous reduce-scatter, its input rank-major,
        once fewer than max_in_flight are in flight (retire the oldest first)."""
        ### BEGIN SOLUTION
        if len(self.in_flight) >= self.max_in_flight:
            self.retire()
        rows = torch.cat([grad.view(self.n, -1) for _, grad in self.bucket], dim=1)
        flat = rows.reshape(-1)  # row r: piece r of every gradient in the bucket
        out = flat.new_empty(flat.numel() // self.n)
        work = dist.reduce_scatter_tensor(out, flat, async_op=True)
        self.in_flight.append(([p for p, _ in self.bucket], flat, out, work))
        self.bucket, self.bucket_bytes = [], 0
        ### END SOLUTION

    @torch.no_grad()
    def retire(self):
        """Wait for the oldest reduce-scatter in flight, put the means of its pieces
        into the master pieces' .grad, and forget its input and output."""
        ### BEGIN SOLUTION
        params, flat, out, work = self.in_flight.pop(0)
        work.wait()
        self.retired.items.append((flat, out))
        sizes = [self.pieces[p].numel() for p in params]
        for param, grad in zip(params, out.split(sizes)):
            self.pieces[param].grad = grad.float() / self.n
        ### END SOLUTION

    @torch.no_grad()
    def finish(self):
        """After backward: the last bucket, then every reduce-scatter still in flight
        retired, oldest first."""
        ### BEGIN SOLUTION
        if self.bucket:
            self.launch()
        while self.in_flight:
            self.retire()
        ### END SOLUTION

    @torch.no_grad()
    def step(self):
        """The optimizer's step on the pieces; each parameter all-gathered from them."""
        ### BEGIN SOLUTION
        self.optimizer.step()
        for param in self.params:
            full = param.new_empty(self.n * self.pieces[param].numel())
            dist.all_gather_into_tensor(full, self.pieces[param].to(param.dtype))
            param.copy_(full[: param.numel()].view_as(param))
        ### END SOLUTION

    def zero_grad(self):
        """Forget the pieces' gradients."""
        ### BEGIN SOLUTION
        for piece in self.pieces.values():
            piece.grad = None
        ### END SOLUTION
