"""Lab 2's careless class (DDP): CLASS[student] = (replacements, parts lost, words shown)."""

from careless.common import DDP_CAT, DDP_DIV, DDP_HOOK, LAST_BUCKET, NOT_CHECKED

CLASS = {
    "last_bucket_left": (
        (LAST_BUCKET, ""),
        {"test_parity", "test_once", "test_buckets", "test_waits"},
        ["finish() must send the last, partly filled bucket", NOT_CHECKED],
    ),
    "register_hook": (
        (DDP_HOOK, "param.register_hook(self.on_grad)"),
        {"test_parity", "test_once", "test_buckets", "test_overlap", "test_waits"},
        ["ddp_student.py, line", "register_post_accumulate_grad_hook(hook)"],
    ),
    "divided_first": (
        (DDP_CAT, DDP_CAT + "        flat /= dist.get_world_size()\n", DDP_DIV, ""),
        {"test_parity"},
        ["already divided by the world size (3)", "PyTorch's DistributedDataParallel"],
    ),
    "summed": (
        (DDP_DIV, ""),
        {"test_parity", "test_waits"},
        ["hold the sum of the ranks' gradients, not their mean"],
    ),
    "no_broadcast": (
        ("                dist.broadcast(tensor, src=0)\n", "                pass\n"),
        {"test_broadcast", "test_parity"},
        ["broadcast every parameter from rank 0"],
    ),
    "waits_at_once": (
        (
            "        work = dist.all_reduce(flat, async_op=True)\n",
            "        work = dist.all_reduce(flat, async_op=True)\n        work.wait()\n",
        ),
        {"test_overlap", "test_waits"},
        ["was waited on at once", "was waited on 2 times, not once"],
    ),
    "handles_kept": (
        ("        self.in_flight = []\n", ""),
        {"test_waits"},
        ["wait(s) on all-reduces of an earlier step"],
    ),
    "skips_the_all_reduce": (  # issue 64: every test needs the idea
        (
            "        work = dist.all_reduce(flat, async_op=True)\n",
            "        work = None  # no all-reduce: each rank keeps its own gradients\n",
            "            work.wait()\n            flat.div_(dist.get_world_size())\n",
            "",
        ),
        {"test_parity", "test_once", "test_buckets", "test_overlap", "test_waits"},
        ["in no all-reduce:"],
    ),
    "one_rank_raises": (
        (
            "        self.bucket.append(param)\n",
            "        self.bucket.append(param)\n"
            "        self.k = getattr(self, 'k', 0) + 1\n"
            "        if dist.get_rank() == 1 and self.k == 50:\n"
            "            raise ValueError('rank one alone')\n",
        ),
        {"test_parity"},
        ["the run failed at step 1, rank 1: ddp_student.py", "rank one alone"],
    ),
}
