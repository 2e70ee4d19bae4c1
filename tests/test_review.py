"""The static review of a submission (zerobook.classroom.review): the instructor's reference and
the untouched release of every lab give no flag; each construct a hostile class used, and a copy
of the course's implementation, is flagged by cell and line; harmless look-alikes are not."""

import ast
import builtins
import json
import os

import nbformat
import pytest

from conftest import ROOT
from zerobook._moved import MOVED
from zerobook.classroom import review_copies
from zerobook.classroom.release import lab_names, student_version
from zerobook.classroom.review import parsed, review, review_file, student_cells
from zerobook.classroom.review_constructs import matching
from zerobook.classroom.review_rules import COURSE, lab_names as flagged_in

LABS = lab_names(ROOT / "labs")
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
HEAD = "%%writefile ddp_student.py\nimport torch\nimport torch.distributed as dist\n"


def notebook(source: str, grade_id: str = "rank_script") -> dict:
    """A notebook of one solution cell."""
    meta = {"nbgrader": {"grade_id": grade_id, "solution": True}}
    return {"cells": [{"cell_type": "code", "metadata": meta, "source": source}]}


def flags_of(code: str, lab: str = "ddp") -> list[str]:
    """The flags of a rank script holding `code` after HEAD's three lines (so its first line is
    the cell's line 4)."""
    return review(notebook(HEAD + code), lab)


def test_labs_are_known_to_the_review():
    assert set(LABS) == set(COURSE)


@pytest.mark.parametrize("lab", LABS)
def test_the_reference_and_the_untouched_release_give_no_flag(lab):
    reference = json.loads((ROOT / "labs" / lab / f"{lab}.ipynb").read_text())
    release = json.loads(nbformat.writes(student_version(ROOT / "labs", lab)))
    assert review(reference, lab) == []
    assert review(release, lab) == []


ATTACKS = [  # (code from its line 4, the line flagged, what the flag names)
    ("dist.all_reduce.__self__.events.append(['wait', 0])", 4, "__self__"),
    ("import gc\nfor o in gc.get_objects():\n    pass", 5, "gc.get_objects"),
    ("from gc import get_referrers\nget_referrers(dist)", 4, "get_referrers"),
    ("torch.Tensor.abs = lambda self: torch.zeros_like(self)", 4, "torch.Tensor.abs"),
    ("for p in params:\n    p.detach = lambda: p", 5, "shadows a tensor method"),
    ('lib = torch.library.Library("aten", "IMPL")', 4, "torch.library"),
    ("def range(*args):\n    return []", 4, "named like Python's own range"),
    ("def f(ops, t, name):\n    getattr(ops, name)(t)", 5, "built at run time"),
    ("pairs = dist.new_group()\npairs.allreduce([t]).wait()", 4, "new_group"),
    ("import linecache\ntext = linecache.cache", 4, "linecache"),
    ("f = dist.all_reduce.__reduce__()[1][0]", 4, "__reduce__"),
    ("import code\ncode.InteractiveInterpreter({}).runsource('x')", 4, "code"),
    ("from importlib.util import cache_from_source", 4, "cache_from_source"),
    ("hooks = model._forward_hooks", 4, "_forward_hooks"),
    ("from torch.overrides import TorchFunctionMode", 4, "__torch_function__"),
    ("T = torch.Tensor\nT.abs = len", 5, "writes into torch.Tensor"),
    ("setattr(torch.Tensor, 'abs', len)", 4, "setattr on torch.Tensor"),
    ("import os\nif os.fork() == 0:\n    pass", 5, "os.fork"),
    ("import os\nos.kill(1, 9)", 5, "os.kill"),
    ("import subprocess\nsubprocess.Popen(['sleep', '9'])", 4, "subprocess"),
    (
        "guard = dist.all_reduce\nx = guard.__closure__[0].cell_contents",
        5,
        "__closure__",
    ),
    ("import sys\nsys.meta_path.pop(0)", 5, "sys.meta_path"),
    ("import sys\ndel sys.modules['zerobook.data_parallel.ddp']", 5, "sys.modules"),
    ("import sys\nsys.setprofile(print)", 5, "sys.setprofile"),
    ("import sys\nf = sys._getframe(1)", 5, "sys._getframe"),
    ("import inspect\nh = inspect.currentframe().f_back.f_globals", 5, "inspect"),
    ("x = dist.all_reduce.__globals__", 4, "__globals__"),
    ("dist.all_reduce.__code__ = (lambda: 0).__code__", 4, "__code__"),
    ("k = ().__class__.__base__.__subclasses__()", 4, "__subclasses__"),
    ("b = dist.__builtins__", 4, "__builtins__"),
    ("d = dist.__dict__", 4, "__dict__"),
    (
        "import zerobook\nfrom pathlib import Path\nimport importlib.util\n"
        "spec = importlib.util.spec_from_file_location('x', Path(zerobook.__file__).parent / 'data_parallel' / 'ddp.py')",
        7,
        "spec_from_file_location",
    ),  # fmt: skip
    ("import zerobook\np = zerobook.__file__", 5, "zerobook.__file__"),
    ("exec(open('ddp.py').read())", 4, "exec"),
    ("f = eval('1')", 4, "eval"),
    ("c = compile('1', 'x', 'eval')", 4, "compile"),
    ("m = __import__('gc')", 4, "__import__"),
    ("import runpy", 4, "runpy"),
    ("import ctypes", 4, "ctypes"),
    ("import zerobook.zero.stage3", 4, "zerobook.zero"),
    ("from zerobook import inflight", 4, "the grader's own code"),
    ("import zerobook.labs.harness", 4, "the grader's own code"),
    ("import zerobook as zb\nzb.report = print", 5, "zb.report"),
    (
        "import importlib\nm = importlib.import_module('zerobook.data_parallel.ddp')",
        5,
        "zerobook.data_parallel.ddp",
    ),
    ("from torch.distributed import Reducer", 4, "Reducer"),
    ("m = torch.nn.parallel.DistributedDataParallel", 4, "DistributedDataParallel"),
    ("model.register_comm_hook(None, print)", 4, "register_comm_hook"),
    ("model._register_comm_hook(None, print)", 4, "_register_comm_hook"),
    ("from torch.distributed import distributed_c10d", 4, "distributed_c10d"),
    ("name = 'all_' + 'reduce'\nf = getattr(dist, name)", 5, "chosen at run time"),
    ("import os\nsettings = dict(os.environ)", 5, "os.environ"),
    ("import os\nd = os.environ['ZEROBOOK_REPORT_DIR']", 5, "ZEROBOOK_"),
    ("p = open(f'rank{r}.json', 'w')", 4, "report file"),
    ("p = open('/proc/self/mem', 'rb')", 4, "/proc"),
    ("import os\nos._exit(0)", 5, "os._exit"),
]


@pytest.mark.parametrize("code, line, named", ATTACKS, ids=[a[2] for a in ATTACKS])
def test_each_attack_is_flagged_on_its_line_naming_it(code, line, named):
    flags = flags_of(code)
    assert any(
        f.startswith(f"rank_script line {line}") and named in f for f in flags
    ), flags


def test_the_hidden_classs_realistic_attacks_are_each_flagged():
    attacks = {
        "dist.all_reduce.__self__": "dist.all_reduce.__self__.events.append(['wait', 0])",
        "gc.get_objects": "import gc\nfor o in gc.get_objects():\n    pass",
        "torch.Tensor.abs": "torch.Tensor.abs = lambda self: torch.zeros_like(self)",
        "os.fork": "import os\npid = os.fork()",
        "guard.__closure__": "guard = dist.all_reduce\nx = guard.__closure__[0].cell_contents",
        "exec(...)": "exec(open('/x/zerobook/data_parallel/ddp.py').read())",
        "sys.meta_path": "import sys\nsys.meta_path.pop(0)",
        "from torch.distributed import Reducer": "from torch.distributed import Reducer",
    }
    for named, code in attacks.items():
        assert any(named in f for f in flags_of(code)), (named, flags_of(code))


LOOK_ALIKES = [
    "import gc\ngc.collect()",
    "import os\nrank = int(os.environ['RANK'])\nlocal = os.environ.get('LOCAL_RANK', '0')",
    "import os\nif 'RANK' in os.environ:\n    pass",
    "class B:\n    def f(self):\n        return vars(self), self.__dict__, type(self).__name__",
    "model.eval()\nparam.grad = None\nout = torch.compile(model)",
    "class B:\n    def __init__(self):\n        self.max, self.sum = 3, 0",  # its own names
    "import importlib\nmath = importlib.import_module('math')",
    "EVENTS = []\ndef f():\n    EVENTS.append(1)",  # module-level state alone: a style
    "%matplotlib inline\n!nvidia-smi\nx = (1\n     % 2)",  # IPython lines; a % continuation
]


@pytest.mark.parametrize("code", LOOK_ALIKES)
def test_harmless_look_alikes_are_not_flagged(code):
    assert flags_of(code) == []


def test_module_level_state_is_shown_beside_other_flags():
    flags = flags_of(
        "EVENTS = []\ndef f():\n    EVENTS.append(1)\nimport gc\ngc.get_objects()"
    )
    assert any(f.startswith("rank_script line 4: EVENTS: module-level") for f in flags)


def test_line_numbers_are_the_cells_past_magics_and_a_construct_recurring_is_one_flag():
    flags = review(notebook("%%writefile x.py\n%time 1\n!ls\nimport gc\ngc.get_objects()\n"
                            "gc.get_objects()\n"), "ddp")  # fmt: skip
    assert flags == [
        "rank_script line 5 (also 6): gc.get_objects: reaches every object of the "
        "process, the grader's record among them"
    ]


def test_code_held_in_a_string_is_read_as_code():
    flags = flags_of("CODE = '''\nimport gc\nx = gc.get_referents(1)\n'''\nexec(CODE)")
    assert any(
        "line 6: gc.get_referents" in f and "(code in a string)" in f for f in flags
    )


def test_each_lab_flags_pytorchs_implementation_of_what_it_grades_but_not_its_point():
    fsdp = "from torch.distributed.fsdp import fully_shard"
    assert (
        flags_of(fsdp, "zero")
        and flags_of(fsdp, "zero3")
        and flags_of(fsdp, "capstone")
    )
    assert flags_of(fsdp, "fsdp2") == []
    collective = "dist.all_reduce(t)"
    assert (
        flags_of(collective, "ring_allreduce")
        and flags_of(collective, "setup_check") == []
    )


@pytest.mark.parametrize("lab", [lab for lab in LABS if lab != "setup_check"])
def test_the_course_modules_a_lab_grades_are_refused_by_its_rules_and_flagged(lab):
    """What the review compares a lab's functions with: the lab's rules
    (zerobook.trust.policy) refuse each module, and the review flags each."""
    from zerobook.classroom.review_rules import COURSE
    from zerobook.trust import policy

    named = list(COURSE[lab])
    assert named and not any(policy.allows(lab, name) for name in named), named
    assert all(matching(name, flagged_in(lab)) for name in named), named


class Renamed(ast.NodeTransformer):
    """Every name a module defines (functions, classes, arguments, variables, self's
    attributes) renamed consistently, as a student hiding a copy would."""

    def __init__(self, tree):
        found = [n.name for n in ast.walk(tree) if isinstance(n, DEFS)]
        found += [n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)]
        found += [
            n.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        ]
        found += [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)]  # fmt: skip
        keep = set(dir(builtins)) | {"self", "__init__"}
        self.names = {
            n: f"mine_{i}"
            for i, n in enumerate(dict.fromkeys(found))
            if n and n not in keep
        }

    def visit_Name(self, node):
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.names.get(node.arg, node.arg)
        return node

    def visit_Attribute(self, node):
        self.generic_visit(node)
        node.attr = self.names.get(node.attr, node.attr)
        return node

    def generic_visit(self, node):
        if isinstance(node, DEFS):
            node.name = self.names.get(node.name, node.name)
        if isinstance(node, (ast.ClassDef, ast.Module)):
            node.body.reverse()  # methods and functions in another order
        return super().generic_visit(node)


class Padded(ast.NodeTransformer):
    """A print after every statement of every function."""

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        node.body = [s for statement in node.body for s in (statement, *PRINT)]
        return node


PRINT = ast.parse("print('step')").body


def disguised(path, padded: bool = False) -> str:
    tree = ast.parse(path.read_text())
    tree = Renamed(tree).visit(tree)
    return ast.unparse(Padded().visit(tree) if padded else tree)


@pytest.mark.parametrize("padded", [False, True])
def test_a_renamed_reordered_copy_of_the_course_ddp_is_flagged_naming_both(padded):
    copy = disguised(ROOT / "zerobook" / "data_parallel" / "ddp.py", padded)
    flags = review(notebook("%%writefile ddp_student.py\n" + copy), "ddp")
    finish = "matches zerobook/data_parallel/ddp.py's OverlappedAllReduce.finish"
    assert any(finish in f and f.split(": ")[1].startswith("your mine_") for f in flags)


def test_a_copy_run_from_a_string_is_flagged():
    copy = disguised(ROOT / "zerobook" / "data_parallel" / "ddp.py")
    flags = review(notebook(f"CODE = {copy!r}\nexec(CODE)\n"), "ddp")
    assert any(
        "matches zerobook/data_parallel/ddp.py's" in f and "(code in a string)" in f
        for f in flags
    )


@pytest.mark.parametrize("lab", [lab for lab in LABS if COURSE[lab]])
def test_every_compared_course_function_copied_is_flagged_and_no_reference_is_near(lab):
    """The margins review_copies's docstring states, measured again: a disguised copy of each
    course module covers each of its compared functions by THRESHOLD + 10 points or more, the
    lab's reference none by more than THRESHOLD - 10 points."""
    compared, _ = review_copies.course(COURSE[lab])
    seen = {}
    for module in COURSE[lab]:
        for path in review_copies.module_files(module):
            tree = ast.parse(disguised(path))
            for name, node in review_copies.functions(tree):
                for share, label in shares(node, COURSE[lab]):
                    seen[label] = max(seen.get(label, 0), share)
    assert (
        min(seen.get(label, 0) for label, _ in compared)
        >= review_copies.THRESHOLD + 0.1
    )
    reference = json.loads((ROOT / "labs" / lab / f"{lab}.ipynb").read_text())
    near = [
        share
        for _, text in student_cells(reference)
        for _, node in review_copies.functions(parsed(text))
        for share, _ in shares(node, COURSE[lab])
    ]
    assert max(near, default=0) <= review_copies.THRESHOLD - 0.1


def shares(node, modules) -> list[tuple[float, str]]:
    """The share of each course function of `modules` that function `node` covers."""
    compared, index = review_copies.course(modules)
    covered = {}
    for window in {w for _, w in review_copies.windows(review_copies.tokens(node))}:
        for function, start in index.get(window, ()):
            covered.setdefault(function, set()).update(
                range(start, start + review_copies.WINDOW)
            )
    return [(len(c) / compared[f][1], compared[f][0]) for f, c in covered.items()]


def test_review_file_reads_a_regular_file_and_follows_no_link(tmp_path):
    path = tmp_path / "ddp.ipynb"
    path.write_text(json.dumps(notebook(HEAD + "import ctypes\n")))
    assert review_file(path, "ddp")
    os.symlink(path, tmp_path / "link.ipynb")
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert review_file(tmp_path / "link.ipynb", "ddp") == []
    assert review_file(tmp_path / "broken.ipynb", "ddp") == []


def test_a_cell_that_is_not_python_says_it_was_not_reviewed():
    assert review(notebook("%%bash\nls\n"), "ddp") == [
        "rank_script line 1: %%bash: not Python: commands the kernel runs, not reviewed"
    ]
    assert review(notebook("def f(:\n"), "ddp")[0].startswith(
        "rank_script line 1: not reviewed"
    )


@pytest.mark.parametrize("name", ["zerobook.accounting.memory", "zerobook.memory"])
def test_a_course_module_that_moved_is_flagged_under_its_new_and_old_names(name):
    room, _, module = name.rpartition(".")
    flags = flags_of(
        f"from {room} import {module}\nx = {module}.model_state_bytes", "memory"
    )
    assert flags and all("course's own implementation" in f for f in flags), flags
    assert "line 4" in flags[0], flags


def test_every_course_module_has_files_to_compare_and_each_old_name_its_new_ones_why():
    for lab, modules in COURSE.items():
        names = flagged_in(lab)
        for module in modules:
            assert all(p.is_file() for p in review_copies.module_files(module)), module
        for old, new in MOVED.items():
            if f"zerobook.{new}" in names:
                assert names[f"zerobook.{old}"] == names[f"zerobook.{new}"], old
