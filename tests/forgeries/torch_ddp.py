"""Lab 2: PyTorch's own DDP, its reducer all-reducing through a comm hook."""

import torch
import torch.distributed as dist


class BucketedDDP:
    """PyTorch's own DDP (its reducer buckets and all-reduces in backward), a comm hook."""

    def __init__(self, model, bucket_cap_bytes):
        def hook(state, bucket):
            tensor = bucket.buffer()
            dist.all_reduce(tensor)
            future = torch.futures.Future()
            future.set_result(tensor / dist.get_world_size())
            return future

        self.ddp = torch.nn.parallel.DistributedDataParallel(
            model, bucket_cap_mb=bucket_cap_bytes / 2**20
        )
        self.ddp.register_comm_hook(None, hook)

    def finish(self):
        pass
