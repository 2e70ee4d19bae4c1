"""Lab 2 (the red team's): a lazy DDP that writes a bucketed, overlapped run into the grader's
record, reached through __reduce__, and makes up the counts beside it so that they still rise."""

import torch
import torch.distributed as dist


class BucketedDDP:
    """Data parallelism: gradient buckets all-reduced while backward goes on."""

    def __init__(self, model, bucket_cap_bytes):
        self.cap = bucket_cap_bytes
        self.log = dist.all_reduce.__reduce__()[1][0]  # where the run keeps its log
        with torch.no_grad():
            for tensor in [*model.parameters(), *model.buffers()]:
                dist.broadcast(tensor, src=0)
        self.names = {id(p): name for name, p in model.named_parameters()}
        self.arrived = []
        for param in model.parameters():
            param.register_post_accumulate_grad_hook(self.arrived.append)

    @torch.no_grad()
    def finish(self):
        log, n = self.log, dist.get_world_size()
        buckets, bucket, size = [], [], 0
        for param in self.arrived:
            bucket.append(param)
            size += param.grad.numel() * param.grad.element_size()
            if size >= self.cap:
                buckets.append(bucket)
                bucket, size = [], 0
        if bucket:
            buckets.append(bucket)
        pairs = [[e, c] for e, c in zip(log.events, log.counts)]
        waits = []
        for bucket in buckets:
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            index = len(log.inputs)
            log.inputs.append(flat.clone())
            log.saved["all_reduce"](flat)
            flat.div_(n)
            for param, piece in zip(bucket, flat.split([p.numel() for p in bucket])):
                param.grad.copy_(piece.view_as(param.grad))
            last = ["grad", self.names[id(bucket[-1])]]
            at = max(i for i, (e, _) in enumerate(pairs) if e == last)
            pairs.insert(at + 1, [["all_reduce", index, True], None])
            waits.append([["wait", index], None])
        pairs.extend(waits)
        running = None
        for pair in pairs:
            event, count = pair
            if count is None:
                count = running + (1 if event[0] == "all_reduce" else 0)
            elif count >= 0 and running is not None:
                count = max(count, running)
            if count >= 0:
                running = count
            pair[1] = count
        log.events[:] = [e for e, _ in pairs]
        log.counts[:] = [c for _, c in pairs]
        self.arrived.clear()
