"""Lab 2: DDP's C++ reducer and its bucket assignment, called directly."""

import torch.distributed as dist


class BucketedDDP:
    """DDP's C++ reducer, built directly."""

    def __init__(self, model, bucket_cap_bytes):
        params = list(model.parameters())
        buckets, _ = dist._compute_bucket_assignment_by_size(params, [bucket_cap_bytes])
        self.reducer = dist.Reducer(
            params, buckets, [0] * len(buckets), dist.group.WORLD
        )

    def finish(self):
        pass
