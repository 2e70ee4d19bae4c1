"""Ring collectives against torch.distributed's, for every ring size 1..N in one launch: ranks
0..k-1 form a group of k (dist.new_group) and run the ring on it; sums, dtypes, sizes, bytes sent.
Every rank creates every group (new_group is collective over the whole world), and only members
run on it."""

import torch
import torch.distributed as dist

import zerobook as zb
from zerobook.data_parallel.collectives import ring_all_reduce
from zerobook.data_parallel.comm import CommMeter


def ring_checks(group) -> dict:
    """Ring against built-in all-reduce on `group` (k ranks), for three dtypes and five sizes."""
    results = {}
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        for size in (1, 7, 1200, 1001, 4096 + 3):
            torch.manual_seed(size + me.rank)
            ours = torch.randint(-8, 8, (size,)).to(
                dtype
            )  # small integers: sums are exact in any order
            theirs = ours.clone()
            with CommMeter() as meter:
                ring_all_reduce(ours, group=group)
            dist.all_reduce(theirs, group=group)
            key = f"{str(dtype).split('.')[-1]}/{size}"
            results[key] = {
                "equal": torch.equal(ours, theirs),
                "sent": meter.bytes_sent(),
                "numel": size,
                "received": meter.bytes_received(),
                "bytes": size * ours.element_size(),
            }
    return results


def builtin_and_non_contiguous(group, k: int) -> dict:
    """nccl-tests' bytes of one built-in all-reduce and all-gather; the ring on a transposed view."""
    with CommMeter() as builtin:
        dist.all_reduce(torch.ones(1000), group=group)
        dist.all_gather_into_tensor(
            torch.empty(1000 * k), torch.ones(1000), group=group
        )
    matrix = torch.arange(12.0).reshape(3, 4).t()  # not contiguous
    expected = matrix * k
    ring_all_reduce(matrix, group=group)
    return {
        "builtin": builtin.summary(),
        "non_contiguous": torch.equal(matrix, expected),
    }


me = zb.setup(verbose=False)
rings = {}
for k in range(1, me.world_size + 1):
    group = dist.new_group(ranks=list(range(k)))
    if me.rank < k:
        rings[k] = {
            "results": ring_checks(group),
            **builtin_and_non_contiguous(group, k),
        }
    dist.barrier()
zb.report(rings=rings)
