"""When each bucket's all-reduce runs against backward: buckets sent after it, or during it.

    python -m torch.distributed.run --standalone --nproc-per-node 4 -m zerobook.runs.ddp_overlap

The data parallelism chapter's model and batch split (ddp_scratch's), its gradients averaged by
`OverlappedAllReduce` two ways: every bucket's all-reduce started after backward (`bucketed`),
and each started by the post-accumulate-grad hooks as soon as its bucket is full (`overlap`).
A subclass records, in seconds from the start of backward, when each gradient arrived, when
each bucket's all-reduce started, and when it completed (its future's callback); the end of
backward and of `finish()` close the step. Rank 0 reports the last of `--steps` steps of each
mode (the first ones warm up), and the bytes of each bucket.
"""

import argparse
import time

import torch

import zerobook as zb
from zerobook.data_parallel.ddp import OverlappedAllReduce, broadcast_params
from zerobook.train.models import GPT, GPTConfig, next_token_loss
from zerobook.train.training import rank_batch

CONFIG = GPTConfig(
    vocab=128, hidden=128, layers=2, heads=4, seq_len=32
)  # ddp_scratch's
MODES = ("bucketed", "overlap")


class TimedAllReduce(OverlappedAllReduce):
    """OverlappedAllReduce that notes the time of every gradient and of each bucket's start and
    completion, in seconds from `start()`."""

    def start(self) -> None:
        """A new step: the clock starts now (call it just before backward)."""
        self.origin = time.perf_counter()
        self.grads: list[float] = []
        self.launched: dict[int, float] = {}
        self.done: dict[int, float] = {}
        self.futures = []

    def clock(self) -> float:
        return time.perf_counter() - self.origin

    def _on_grad(self, param: torch.Tensor) -> None:
        self.grads.append(self.clock())
        super()._on_grad(param)

    def _launch(self, index: int) -> None:
        self.launched[index] = self.clock()
        super()._launch(index)
        future = self.pending[-1][1].get_future()
        self.futures.append(future.then(lambda _, i=index: self.note_done(i)))

    def note_done(self, index: int) -> None:
        self.done[index] = self.clock()

    def finish(self) -> None:
        super().finish()
        for future in self.futures:  # the callbacks have run
            future.wait()


def timed_step(mode: str, cli, me: zb.Rank) -> dict:
    """`cli.steps` SGD steps of one mode; the last step's times (seconds from backward's start)."""
    torch.manual_seed(0)
    model = GPT(CONFIG).to(me.device)
    broadcast_params(model)
    buckets = TimedAllReduce(
        model, bucket_bytes=cli.bucket_kib * 1024, overlap=mode == "overlap"
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(cli.steps):
        optimizer.zero_grad(set_to_none=False)
        loss = next_token_loss(model, rank_batch(CONFIG, cli.per_rank, 1000 + step, me))
        buckets.start()
        loss.backward()
        backward_end = buckets.clock()
        buckets.finish()
        finished = buckets.clock()
        optimizer.step()
    return {
        "grads": buckets.grads,
        "launched": [buckets.launched[i] for i in range(len(buckets.buckets))],
        "done": [buckets.done[i] for i in range(len(buckets.buckets))],
        "backward_end": backward_end,
        "finished": finished,
        "bucket_bytes": [
            sum(p.numel() * p.element_size() for p in bucket)
            for bucket in buckets.buckets
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--per-rank", type=int, default=4, help="samples per rank")
    parser.add_argument("--bucket-kib", type=int, default=256)
    cli = parser.parse_args()
    me = zb.setup()
    zb.report(**{mode: timed_step(mode, cli, me) for mode in MODES})


if __name__ == "__main__":
    main()
