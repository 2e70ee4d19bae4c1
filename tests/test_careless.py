"""Careless mistakes, graded as a class (issue 42): each submission is the reference with one
realistic mistake, graded sandboxed (`python -m zerobook.classroom grade --jobs 2`) beside the
reference, which keeps full marks in the same run. Each loses the parts whose property it
breaks, keeps the others (a crash keeps what the steps before it showed: zerobook.labs.crash),
and its feedback page names it in words a student can act on; none ends in a SIGSEGV
(zerobook.labs.freed) or in the grader's own frames.

CORPUS[lab][student] = (the (old, new) replacements, the parts it loses, the words its
feedback shows). The parts not lost keep their points. The capstone's four: a crash in the
training launch loses its four tests and keeps the resume test (a launch of its own) when
the mistake is in the DDP, which resuming does not use.
"""

import pytest

from test_forgery import class_of, outcome, reference, replaced
from test_capstone_lab import CLIP_SUM, SHORT
from test_grading_labs import POINTS
from test_hostile import graded_class

pytestmark = [pytest.mark.slow]

LAST_BUCKET = "        if self.bucket:\n            self.launch()\n"
DDP_CAT = "        flat = torch.cat([p.grad.reshape(-1) for p in self.bucket])\n"
DDP_DIV = "            flat.div_(dist.get_world_size())\n"
DDP_HOOK = "param.register_post_accumulate_grad_hook(self.on_grad)"
NOT_CHECKED = "not checked (every step is needed): the run failed at step"
DDP = {
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

Z3_FREE = "        for unit in self.params:\n            self.free(unit)\n"
ZERO3 = {
    "optimizer_over_full_parameters": (
        (
            "        decay = [m for p, m in self.masters.items() if p.dim() >= 2]\n"
            "        no_decay = [m for p, m in self.masters.items() if p.dim() < 2]\n",
            "        decay = [p for p, m in self.masters.items() if p.dim() >= 2]\n"
            "        no_decay = [p for p, m in self.masters.items() if p.dim() < 2]\n",
        ),
        "all",
        ["your optimizer was given embed.weight, the full parameter itself"],
    ),
    "prefetch_of_the_wrong_unit": (
        (
            "            self.gather(self.order[i + 1], async_op=True)\n",
            "            self.gather(self.order[i], async_op=True)\n",
        ),
        {"test_parity", "test_kept", "test_traffic", "test_forward"},
        ["was used (by torch's copy_) in step 1, forward after its storage was freed"],
    ),
    "unpadded_pieces": (
        (
            "return F.pad(flat, (0, -flat.numel() % self.world_size))"
            ".chunk(self.world_size)",
            "return flat.chunk(self.world_size)",
        ),
        "all",
        ["pad each flattened tensor with zeros to a multiple of the world size (3)"],
    ),
    "root_freed_after_its_forward": (
        (
            "        if i > 0:\n            self.free(self.order[i])\n",
            "        self.free(self.order[i])\n",
        ),
        "all",
        ["the root (embedding, final norm) stays gathered for the whole step"],
    ),
    "register_hook": (
        (DDP_HOOK, "param.register_hook(self.on_grad)"),
        "all",
        ["zero3_student.py, line", "register_post_accumulate_grad_hook(hook)"],
    ),
    "summed": (
        ("        out /= self.world_size\n", ""),
        {"test_parity"},
        ["the gradients' sum, not their mean: divide each reduce-scattered gradient"],
    ),
    "never_waits": (
        ("        if handle is not None:\n            handle.wait()\n", ""),
        {"test_parity", "test_forward", "test_backward"},
        ["all-gather was never waited on: wait on its handle before"],
    ),
    "rebinds_data": (  # a student trial's: free and gather by rebinding .data
        (
            "            p.untyped_storage().resize_(0)\n",
            "            p.data = torch.empty(0)\n",
            "            p.untyped_storage().resize_(p.numel() * p.element_size())\n",
            "            p.data = torch.empty(self.shape[p])\n",
            "        self.units = list(units)\n",
            "        self.units = list(units)\n"
            "        self.shape = {p: p.shape for p in model.parameters()}\n",
        ),
        "all",
        ["embed.weight's .data was rebound to another tensor (shape now [0])"],
    ),
    "divided_first": (  # a student trial's: DDP's habit
        (
            "        grads = [self.pieces(p.grad) for p in self.params[unit]]\n",
            "        grads = [self.pieces(p.grad / self.world_size) for p in self.params[unit]]\n",
            "        out /= self.world_size\n",
            "",
        ),
        {"test_parity"},
        ["gradients divided by the world size before the reduce-scatter summed them"],
    ),
    "never_frees": (
        ("            p.untyped_storage().resize_(0)\n", "            pass\n"),
        {"test_kept", "test_peak"},
        ["is still gathered after step()"],
    ),
}

Z2_DIV = "            self.pieces[param].grad = grad.float() / self.n\n"
ZERO = {
    "all_reduces_the_full_gradients": (  # issue 64: every test needs the idea (DDP's way)
        (
            "        out = flat.new_empty(flat.numel() // self.n)\n"
            "        work = dist.reduce_scatter_tensor(out, flat, async_op=True)\n",
            "        out = flat.view(self.n, -1)[self.rank]  # its pieces, once summed\n"
            "        work = dist.all_reduce(flat, async_op=True)\n",
        ),
        {"test_buckets", "test_overlap", "test_traffic"},  # its memory is ZeRO-2's
        ["elements all-reduced: reduce-scatter them instead", "in no reduce-scatter"],
    ),
    "register_hook": (
        (DDP_HOOK, "param.register_hook(self.on_grad)"),
        "all",
        ["zero_student.py, line", "register_post_accumulate_grad_hook(hook)"],
    ),
    "unpadded": (
        (
            "    return torch.cat([flat, flat.new_zeros(-flat.numel() % world_size)])\n",
            "    return flat\n",
        ),
        "all",
        ["pad it with zeros to a multiple of the world size (3) first"],
    ),
    "summed": (
        (Z2_DIV, Z2_DIV.replace(" / self.n", "")),
        {"test_parity", "test_overlap"},
        ["holds the sum of the ranks' gradients, not their mean"],
    ),
    "waits_at_once": (
        (
            "        work = dist.reduce_scatter_tensor(out, flat, async_op=True)\n",
            "        work = dist.reduce_scatter_tensor(out, flat, async_op=True)\n"
            "        work.wait()\n",
        ),
        {"test_overlap"},
        ["was waited on at once, before any later gradient arrived"],
    ),
    "decay_on_1d": (
        (
            '        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]\n',
            '        groups = [{"params": decay + no_decay}]\n',
        ),
        {"test_parity"},
        ["weight decay on 1-D tensor(s) blocks.0.ln1.weight"],
    ),
    "never_retires": (
        (
            "        if len(self.in_flight) >= self.max_in_flight:\n"
            "            self.retire()\n",
            "",
        ),
        {"test_held"},
        ["it was retired only in finish()"],
    ),
    "retires_early": (
        (
            "        if len(self.in_flight) >= self.max_in_flight:\n",
            "        if self.in_flight:\n",
        ),
        {"test_overlap"},
        ["before the launch that retires it"],
    ),
    "one_rank_raises": (
        (
            "        while self.in_flight:\n",
            "        self.k = getattr(self, 'k', 0) + 1\n"
            "        if self.rank == 2 and self.k == 2:\n"
            "            raise RuntimeError('rank 2 alone')\n"
            "        while self.in_flight:\n",
        ),
        {"test_parity", "test_state"},
        ["the run failed in the AdamW run's step 1, rank 2", "rank 2 alone"],
    ),
}
TRAIN = {
    "test_curves",
    "test_clip",
    "test_kept",
    "test_target",
}  # one launch; resume: its own
CAPSTONE = {
    "ddp_sum_not_mean": (
        (DDP_DIV, ""),
        TRAIN,
        ["holds 'sum', not the mean of every rank's"],
    ),
    "ddp_register_hook": (
        (
            DDP_HOOK + "\n        self.bucket, self.bucket_bytes",
            "param.register_hook(self.on_grad)\n        self.bucket, self.bucket_bytes",
        ),
        TRAIN,
        ["capstone_student.py, line", "'NoneType' object has no attribute 'numel'"],
    ),
    "zero3_prefetch_of_the_wrong_unit": (
        ZERO3["prefetch_of_the_wrong_unit"][0],
        "all",
        ["in wait: `rows[:, offset", "after its storage was freed"],
    ),
    "zero3_root_freed_after_its_forward": (
        ZERO3["root_freed_after_its_forward"][0],
        "all",
        [
            "embed.weight's storage was freed (resized to 0 bytes) when it was about to be "
            "used by backward (root's)"
        ],  # fmt: skip
    ),
}
CAPSTONE["norm_summed_backwards"] = (
    (
        "    for piece in pieces:\n" + CLIP_SUM,
        "    for piece in reversed(pieces):\n" + CLIP_SUM,
    ),
    {
        "test_curves",
        "test_clip",
    },  # trains as well: bytes, target, resume keep their points
    ["summed in another order"],
)
FS_POLICY = (
    "MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype)"
)
FSDP2 = {
    "skips_the_sharding": (  # issue 64: every test needs the idea
        (
            "    for block in model.blocks:\n"
            "        fully_shard(block, mesh=mesh, mp_policy=policy)\n"
            "    fully_shard(model, mesh=mesh, mp_policy=policy)\n",
            "",
        ),
        "all",
        ["'Block' object has no attribute 'set_modules_to_forward_prefetch'"],
    ),
    "fp32_communication": (
        (FS_POLICY, "MixedPrecisionPolicy()"),
        {"test_parity", "test_traffic"},
        [
            "the losses differ",
            "with reduce_dtype=bf16 the collectives should move exactly what ours moves",
        ],
    ),
    "no_forward_prefetch": (
        ("block.set_modules_to_forward_prefetch(blocks[k + 1 : k + 2])", "pass"),
        {"test_prefetch"},
        ["blocks.1 is not gathered before blocks.0 computes"],
    ),
    "weights_only_checkpoint": (
        (
            'dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)',
            'dcp.save({"model": model_state}, checkpoint_id=path)',
            'state = {"model": model_state, "optim": optim_state}',
            'state = {"model": model_state}',
            'optim_state_dict=state["optim"]',
            "optim_state_dict=optim_state",
        ),
        {"test_checkpoint"},
        ["save must write every weight and AdamW moment there, with dcp.save"],
    ),
    "saves_only_the_model": (  # issue 67: DCP's CheckpointException is a BaseException
        (
            'dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)',
            'dcp.save({"model": model_state}, checkpoint_id=path)',
        ),
        {"test_checkpoint"},
        ["save must write every weight and AdamW moment there, with dcp.save"],
    ),
}
RING_SECOND = """    for step in range(world_size - 1):
        exchange(
            parts[(rank + 1 - step) % world_size], parts[(rank - step) % world_size]
        )
"""
RING = {
    "skips_the_communication": (  # issue 64: every test needs the idea
        (
            "    for step in range(world_size - 1):\n        send, recv",
            "    tensor.mul_(world_size)\n    for step in range(0):\n        send, recv",
            RING_SECOND,
            "",
        ),
        "all",
        ["differs from dist.all_reduce for", "sent 0 bytes, a ring sends"],
    ),
    "no_all_gather_half": (
        (RING_SECOND, ""),
        "all",
        ["differs from dist.all_reduce for"],
    ),
    "through_rank_0": (  # all-reduce's job done another way: correct, not a ring's bytes
        (
            "    for step in range(world_size - 1):\n        send, recv",
            "    if rank:\n"
            "        dist.send(tensor, 0)\n"
            "        dist.recv(tensor, 0)\n"
            "    else:\n"
            "        for peer in range(1, world_size):\n"
            "            other = torch.empty_like(tensor)\n"
            "            dist.recv(other, peer)\n"
            "            tensor.add_(other)\n"
            "        for peer in range(1, world_size):\n"
            "            dist.send(tensor, peer)\n"
            "    for step in range(0):\n        send, recv",
            RING_SECOND,
            "",
        ),
        {"test_bytes"},
        ["a ring sends"],
    ),
}
ZOO_SKIP = "        if bad.item():\n"
ZOO = {
    "skips_when_every_rank_overflowed": (
        (ZOO_SKIP, "        if bad.item() == dist.get_world_size():\n"),
        {"test_skip"},
        ["holds NaN or inf: a step ran on a loss that was not finite"],
    ),
}  # a seed per rank is the released replicas bug: the release scores 0 (test_grading_labs)
ZPP_GATHER = (
    "    dist.all_gather_into_tensor(all_codes, codes, group=group)\n"
    "    dist.all_gather_into_tensor(all_scales, scales, group=group)\n"
    "    pieces = zip(all_codes.chunk(n), all_scales.chunk(n))\n"
    "    return torch.cat([dequantize(c, s, shard.numel(), shard.dtype) for c, s in pieces])\n"
)
ZEROPP = {
    "gathers_the_shard_itself": (  # issue 64: every test needs the idea
        (
            ZPP_GATHER,
            "    full = shard.new_empty(n * shard.numel())\n"
            "    dist.all_gather_into_tensor(full, shard, group=group)\n"
            "    return full\n",
        ),
        {"test_gather_bytes", "test_gather", "test_train"},
        [
            "two bytes an element: quantize before you send",
            "every rank's piece is its shard, bit for bit: nothing was quantized",
            "your training's loss is ZeRO-3's at every step, bit for bit",
        ],
    ),
    "piece_a_view": (
        (
            "    return full.view(g, -1)[i].clone()\n",
            "    return full.view(g, -1)[i]\n",
        ),
        {"test_secondary", "test_train"},  # the training keeps the pieces too
        ["a view keeps all of `full` alive; keep a copy (.clone())"],
    ),
    "scale_without_levels": (
        ("largest / LEVELS)", "largest)"),
        {
            "test_quantizer",
            "test_gather",
            "test_train",
        },  # bytes and the node's pieces kept
        ["more than its bound"],
    ),
}
CORPUS = {
    "ring_allreduce": RING,
    "bug_zoo": ZOO,
    "zeropp": ZEROPP,
    "ddp": DDP,
    "zero3": ZERO3,
    "zero": ZERO,
    "capstone": CAPSTONE,
    "fsdp2": FSDP2,
}
# The capstone's and the bug zoo's classes leave the reference out: their full marks are
# graded on their own (test_grading_labs; the capstone on the full schedule), and one more
# submission of either costs minutes (the bug zoo's: ~100 s, 2.5x its reference's launches).
BESIDE = sorted(set(CORPUS) - {"capstone", "bug_zoo"})
# The capstone's class is graded from an instructor's copy of labs/ whose hidden parameters
# shorten its runs (tests/test_capstone_lab.SHORT: 40 steps, not 600; ~1/6 of the CPU).
# Its target is not compared: the reference reaches it only near the full schedule
# (measured: 4.26 bits/byte after 100 steps, 3.74 after 200, bigram 3.46).
SCHEDULES = {"capstone": SHORT}
# lost in every short run, graded in the full one (test_grading_labs)
UNCOMPARED = {"capstone": {"test_target"}}
# So the grader, which times the reference before grading and refuses one that fails its
# own tests, finds the lab's limits already measured (generous: no mistake here is slow).
MEASURED = {"capstone": dict(reference_s=0, part_s=600, cell_s=1230, submission_s=2430)}


def private_labs(lab: str, folder):
    """An instructor's copy of labs/ holding `lab`, its hidden parameters SCHEDULES[lab]."""
    import json
    import shutil

    from conftest import ROOT

    shutil.copytree(
        ROOT / "labs" / lab,
        folder / lab,
        ignore=shutil.ignore_patterns("*_student.py", "__pycache__"),
    )
    shutil.copy(ROOT / "labs" / "nbgrader_config.py", folder)
    (folder / lab / "hidden_params.json").write_text(json.dumps(SCHEDULES[lab]))
    return folder


def labs(names):
    """One worker grades each class, for every test of it (make test-grading: loadgroup)."""
    return [
        pytest.param(lab, marks=pytest.mark.xdist_group(f"careless_{lab}"))
        for lab in names
    ]


def why(page: str) -> str:
    """The page's lines that say why a run failed (a CI log shows no page): at most five."""
    said = [
        line.strip()[:300]
        for line in page.splitlines()
        if any(w in line for w in ("longer than", "not checked", "killed", "Error:"))
        and "{" not in line  # the page's style sheet
    ]
    return "the page says: " + " | ".join(said[:5]) if said else "the page says nothing"


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """One grading run of a lab's careless class, the reference among them (BESIDE)."""
    lab = request.param
    scripts = {
        name: replaced(reference(lab), *pairs)
        for name, (pairs, _, _) in CORPUS[lab].items()
    }
    notebooks = class_of(lab, scripts)
    if lab not in BESIDE:
        del notebooks["reference"]
    labs = None
    if lab in SCHEDULES:
        labs = private_labs(lab, tmp_path_factory.mktemp(f"private_{lab}"))
    limits = MEASURED.get(lab)
    return lab, graded_class(
        tmp_path_factory, lab, notebooks, POINTS[lab], labs=labs, limits=limits
    )


@pytest.mark.parametrize("graded", labs(BESIDE), indirect=True)
def test_the_reference_keeps_full_marks_beside_the_careless(graded):
    lab, run = graded
    scores, _, _ = outcome(run, "reference")
    assert scores == POINTS[lab], scores


@pytest.mark.parametrize("graded", labs(sorted(CORPUS)), indirect=True)
def test_each_mistake_loses_its_parts_keeps_the_rest_and_is_named(graded):
    """Every student of the class at once: the first that differs is named."""
    lab, run = graded
    wrong = []
    for student, (_, loses, words) in CORPUS[lab].items():
        scores, page, _ = outcome(run, student)
        lost = set(POINTS[lab]) if loses == "all" else loses
        compared = set(POINTS[lab]) - UNCOMPARED.get(lab, set())
        want = {
            part: 0 if part in lost else points
            for part, points in POINTS[lab].items()
            if part in compared
        }
        scores = {part: s for part, s in scores.items() if part in compared}
        if scores != want:
            wrong.append(f"{student}: scored {scores}, expected {want}; {why(page)}")
        wrong += [
            f"{student}: the feedback does not say {w!r}; {why(page)}"
            for w in words
            if w not in page
        ]
        for bad in ("Segmentation fault", "SIGSEGV", "site-packages", "/work/"):
            if bad in page:
                wrong.append(f"{student}: the feedback shows {bad!r}")
    assert not wrong, "\n".join(wrong)
