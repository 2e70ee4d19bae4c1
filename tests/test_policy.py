"""A graded file under its lab's allow-list (zerobook.trust.policy, .restricted): every reference
and every careless submission passes it; each class of attack the red teams found is refused by
name, before the file runs or when an alias is used, whatever the lab's harness checks after."""

import textwrap

import pytest

from conftest import ROOT
from test_careless import CORPUS
from test_forgery import reference
from zerobook.classroom.release import lab_names
from zerobook.trust import policy, policy_text, restricted

LABS = lab_names(ROOT / "labs")


def load(tmp_path, source: str, lab: str = "ddp"):
    path = tmp_path / f"{lab}_student.py"
    path.write_text(textwrap.dedent(source))
    return restricted.load(path, "student", lab)


@pytest.mark.parametrize("lab", LABS)
def test_every_reference_passes_its_labs_rules(tmp_path, lab):
    assert policy_text.check(reference(lab), lab) == []
    load(tmp_path, reference(lab), lab)  # its imports and top level run under the rules


def test_every_careless_submission_passes_its_labs_rules():
    """Honest students never meet the rules: the careless class's mistakes are ideas, not
    reaches around the grader (one of them counts calls with getattr, which is allowed)."""
    for lab, corpus in CORPUS.items():
        for student, (pairs, _, _) in corpus.items():
            source = reference(lab)
            for old, new in zip(pairs[::2], pairs[1::2]):
                source = source.replace(old, new)
            assert policy_text.check(source, lab) == [], (lab, student)


# (the class of attack, its file, its lab, words of the refusal)
REFUSED = [
    ("harness", "import __main__", "ddp", "__main__ is not a module"),
    (
        "harness",
        "import sys\nh = sys.modules['__main__']",
        "ddp",
        "sys is not a module",
    ),
    (
        "harness",
        "def g():\n    yield 1\nf = g().gi_frame.f_back.f_globals",
        "zero",
        ".gi_frame reaches the interpreter's inside",
    ),
    (
        "harness",
        "try:\n    1 / 0\nexcept Exception as e:\n    t = e.__traceback__",
        "zero",
        ".__traceback__ is a library's or the grader's inside",
    ),
    ("harness", "import os\np = os.environ", "zero3", "os is not a module"),
    (
        "harness",
        "import torch\np = torch.os.environ",
        "zero3",
        "torch.os is not a module",
    ),
    (
        "harness",
        "import torch\nt = torch\nm = t.sys.modules",
        "zero3",
        "torch.sys is not a module",
    ),
    (
        "harness",
        "x = '{0.__class__}'.format(1)",
        "ddp",
        ".format() looks up attributes",
    ),
    (
        "harness",
        "f = getattr('{0.__class__}', 'format')",
        "ddp",
        "getattr(..., 'format')",
    ),
    ("harness", "f = getattr(print, '__self__')", "ddp", "getattr(..., '__self__')"),
    ("withheld", "import operator", "memory", "operator is not a module"),
    ("withheld", "import _thread", "ddp", "_thread is not a module"),
    ("withheld", "import threading", "ddp", "threading is not a module"),
    ("withheld", "import zerobook", "ddp", "zerobook is not a module"),
    (
        "withheld",
        "from zerobook.data_parallel import ddp",
        "ddp",
        "zerobook.data_parallel is not a module",
    ),
    (
        "withheld",
        "import torch\nD = torch.nn.parallel.DistributedDataParallel",
        "capstone",
        "torch.nn.parallel is not a module",
    ),
    (
        "withheld",
        "import torch.distributed as dist\nR = dist.Reducer",
        "ddp",
        "torch.distributed.Reducer is not a name",
    ),
    ("state", "import copyreg", "zero", "copyreg is not a module"),
    ("state", "import gc", "zero3", "gc is not a module"),
    ("state", "import torch\ntorch.kept = []", "zero3", "the whole process shares"),
    (
        "state",
        "import torch\nt = torch\nt.kept = []",
        "zero3",
        "the whole process shares",
    ),
    # a library's method hidden on one object: the grader calls it too (`p.abs()` read as
    # zeros made every parity difference 0; a handle's wait answering at once)
    ("method", "import torch\np = torch.ones(2)\np.abs = len", "ddp", "the method abs"),
    (
        "method",
        "import torch\np = torch.nn.Parameter(torch.ones(2))\nsetattr(p, 'clone', len)",
        "zero",
        "the method clone on a Parameter",
    ),
    (
        "method",
        "import torch\nm = torch.nn.Linear(2, 2)\nm.forward = len",
        "zero3",
        "the method forward on a Linear",
    ),
    (
        "method",
        "import torch.distributed as dist\nclass H:\n    def wait(self):\n        pass\n"
        "class S(H):\n    pass\nS().wait = len\ndist.all_reduce.keep = 1",
        "ddp",
        "the function all_reduce",
    ),
    # state the whole process shares, which a second import finds (Lab 6's checkpoint kept
    # in memory) and no walk of the file's state looks at (the ZeRO labs' memory parts)
    ("state", "import torch\ntorch.nn.Module.kept = {}", "fsdp2", "the class Module"),
    (
        "state",
        "import torch\nclass A:\n    pass\nsetattr(torch.Tensor, 'kept', A)",
        "zero",
        "the class Tensor",
    ),
    (
        "state",
        "import torch.nn.functional as F\nF.relu.kept = []",
        "zero3",
        "the function relu",
    ),
    (
        "state",
        "import torch\nm = torch.nn.Module\nm.kept = []\ndel m.kept",
        "fsdp2",
        "the class Module",
    ),
    ("state", "import torch\nn = torch.linalg.common_notes", "fsdp2", "not a name"),
    (
        "state",
        "from torch.nn.functional import BroadcastingList1\nBroadcastingList1.kept = []",
        "fsdp2",
        "a library's BroadcastingListCls",
    ),
    ("state", "from functools import lru_cache", "zero", "not a name"),
    (
        "metered",
        "import torch.distributed as dist\nS = dist.TCPStore",
        "ring_allreduce",
        "torch.distributed.TCPStore is not a name",
    ),
    (
        "metered",
        "import torch.distributed as dist\nd = dist\nS = d.TCPStore",
        "ring_allreduce",
        "torch.distributed.TCPStore is not a name",
    ),
    (
        "metered",
        "import torch.distributed as dist\ng = dist.new_group",
        "ring_allreduce",
        "torch.distributed.new_group is not a name",
    ),
    (
        "metered",
        "import torch.distributed as dist\nr = dist.all_reduce",
        "ring_allreduce",
        "torch.distributed.all_reduce is not a name",
    ),
    ("metered", "import socket", "ring_allreduce", "socket is not a module"),
    (
        "metered",
        "import socket\ns = socket.socket",
        "setup_check",
        "socket.socket is not a name",
    ),
    (
        "metered",
        "import torch\ns = torch.UntypedStorage.from_file",
        "zeropp",
        ".from_file reaches",
    ),
    (
        "torch",
        "import torch\ntorch.set_flush_denormal(True)",
        "zero",
        "torch.set_flush_denormal is not a name",
    ),
    (
        "torch",
        "import torch\nx = torch.load('c.pt', weights_only=False)",
        "capstone",
        "weights_only=False) would run a pickle's code",
    ),
    (
        "rules",
        "import torch.distributed as dist\n"
        "d = type(dist)('ddp', 'torch.distributed')\n"
        "r = d.all_reduce",
        "ring_allreduce",
        "a module view is made by the grader's import only",
    ),
    ("rules", "e = eval('1')", "ddp", "eval reaches around the grader's rules"),
    (
        "rules",
        "def f(x: '().__class__.__base__') -> None:\n    pass",
        "zero",
        ".__class__ is a library's or the grader's inside",
    ),
    ("rules", "import typing\nh = typing.get_type_hints", "zero", "get_type_hints"),
    (
        "rules",
        "import functools\nd = functools.singledispatch",
        "zero",
        "singledispatch",
    ),
    ("rules", "from . import x", "ddp", "a relative import"),
    (  # our red team's (2026-12-07): Lab 6's reader unpickled it and ran torch.save
        "reader",
        "import torch\nclass Note:\n    def __reduce__(self):\n"
        "        return (torch.save, (torch.arange(3), 'x.pt'))\n",
        "fsdp2",
        "def __reduce__: Python or torch calls it behind the code that holds the object",
    ),
    (
        "reader",
        "class Late:\n    def __del__(self):\n        pass\n",
        "zero3",
        "def __del__:",
    ),
]


@pytest.mark.parametrize(
    "kind, source, lab, says",
    REFUSED,
    ids=[f"{r[0]}-{i}" for i, r in enumerate(REFUSED)],
)
def test_each_class_of_attack_is_refused_by_name(tmp_path, kind, source, lab, says):
    with pytest.raises(restricted.PolicyViolation) as refused:
        load(tmp_path, source, lab)
    assert says in str(refused.value), str(refused.value)


def test_a_refusal_names_the_line_and_what_the_file_may_import(tmp_path):
    with pytest.raises(restricted.PolicyViolation) as refused:
        load(tmp_path, "import torch\n\nimport sys\n", "ddp")
    said = str(refused.value)
    assert (
        "line 3: `import sys`: sys is not a module this lab's file may import" in said
    )
    assert f"this lab's file may import {policy.modules_text('ddp')}" in said


def test_what_the_file_holds_is_a_view_that_follows_the_real_module(
    tmp_path, monkeypatch
):
    """A harness that meters a collective by replacing it is what the file's call reaches; a
    view is a module to the harness's walkers, with no name of Python's own."""
    import types

    import torch.distributed

    student = load(tmp_path, "import torch.distributed as dist\n", "ddp")
    monkeypatch.setattr(torch.distributed, "all_reduce", metered := object())
    assert student.dist.all_reduce is metered
    assert isinstance(student.dist, types.ModuleType)
    assert getattr(student.dist, "__file__", None) is None
    own = load(
        tmp_path, "class A:\n    def __init__(self):\n        self._x = 1\n", "ddp"
    )
    assert (
        own.A()._x == 1
    )  # an object of the file's own class: its names are the file's


@pytest.mark.parametrize(
    "how",
    [
        "import torch\nself = torch.nn.Linear(2, 2)\nh = self._forward_hooks\n",
        "import torch\n\n\nclass A:\n    def hooks(self):\n        return self._forward_hooks\n\n\n"
        "h = A.hooks(torch.nn.Linear(2, 2))\n",
    ],
    ids=["a name called self", "a method given another object"],
)
def test_self_underscore_is_the_files_own_only_on_its_own_objects(tmp_path, how):
    """The red team named a foreign object `self` to take the exemption: `self._x` is checked
    when used, on an object of a class the file made (zerobook.trust.restricted.own)."""
    with pytest.raises(
        restricted.PolicyViolation, match="not an object of a class your"
    ):
        load(tmp_path, how, "zero3")
    later = "from __future__ import annotations\n\n\ndef f(x: Zero3) -> Zero3:\n    return x\n"
    assert load(tmp_path, later, "zero3").f(1) == 1


@pytest.mark.parametrize("lab", LABS)
def test_each_lab_tells_its_rules_before_the_student_writes_a_line(lab):
    """The intro of the instructor notebook (and so of the release) ends with the rules as
    zerobook.trust.policy has them."""
    import json

    cells = json.loads((ROOT / "labs" / lab / f"{lab}.ipynb").read_text())["cells"]
    intro = next(
        c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "intro"
    )
    said = " ".join("".join(intro["source"]).split())
    assert said.endswith(" ".join(policy.rules_text(lab).split())), lab


def test_a_name_the_file_binds_is_its_own_not_the_builtin(tmp_path):
    """A parameter called `input` or `compile` is the file's: only a use of the builtin
    itself is refused (and, unbound, it is not among the file's builtins either)."""
    own = "def step(input, compile=False):\n    return input if compile else -input\n"
    assert policy_text.check(own, "ddp") == []
    assert load(tmp_path, own, "ddp").step(2) == -2
    with pytest.raises(NameError):
        load(tmp_path, "def f(open):\n    return open\n\n\nx = open\n", "ddp")


# A red team of the course's own (issue 64, item 7) tried the rules as a student with an
# assistant would, reading this package's source; each way out it found, kept: every one now
# refused by name, or missing from the file's builtins (tests/forgeries/policy/).
RED_TEAM = ROOT / "tests" / "forgeries" / "policy"


# (attack_9 needs two ranks: its pickle meets JSON, below)
@pytest.mark.parametrize(
    "attack",
    sorted(p.stem for p in RED_TEAM.glob("attack_*.py") if p.stem != "attack_9"),
)
@pytest.mark.parametrize("lab", ["ddp", "zero3", "setup_check"])
def test_each_way_out_a_red_team_found_is_closed(tmp_path, attack, lab):
    source = (RED_TEAM / f"{attack}.py").read_text()
    with pytest.raises((restricted.PolicyViolation, NameError)):
        load(tmp_path, source, lab)


def test_objects_between_ranks_are_json_never_a_peers_pickle():
    """all_gather_object and broadcast_object_list unpickled what a peer sent (the red team's
    rank 1 sent `builtins.__import__('sys')`): the file gets JSON versions, and the harnesses
    use them too (zerobook.trust.plain_objects)."""
    import torch

    from zerobook.trust import plain_objects

    pickle = b"cbuiltins\n__import__\n(Vsys\ntR."
    with pytest.raises(ValueError):
        plain_objects.decoded(
            torch.tensor(list(pickle), dtype=torch.uint8), len(pickle)
        )
    said = plain_objects.encoded({"host": "a", "rank": 1}, "cpu")
    assert plain_objects.decoded(said, said.numel()) == {"host": "a", "rank": 1}
    import torch.distributed as dist

    assert (
        plain_objects.WRAPPED["torch.distributed.all_gather_object"](
            dist.all_gather_object
        )
        is plain_objects.all_gather_object
    )


def test_the_files_own_objects_and_classes_and_torchs_objects_stay_writable(tmp_path):
    """What honest files change: their objects, their classes' counters, a module's or a
    tensor's attributes (`p.grad = g`, `model.units = ...`); only what the process shares is
    refused."""
    module = load(
        tmp_path,
        """
        import torch

        class Counter:
            made = 0

            def __init__(self):
                Counter.made += 1
                self.seen = []
                setattr(self, "count", 0)
                self.count += 1
                del self.count


        c = Counter()
        model = torch.nn.Linear(2, 2)
        model.units = [model]
        p = model.weight
        p.grad = torch.ones_like(p)
        p.kept = 1
        """,
        "zero",
    )
    assert module.Counter.made == 1 and module.p.kept == 1
