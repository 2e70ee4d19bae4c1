"""What the ZeRO labs count as held (zerobook.labs.student_state.tensors, Labs 4 and 5 and the
capstone): every tensor the student's object and file reach, through torch's objects too (a
module, an optimizer, a tensor's own attributes) and wherever Python keeps a reference (a
closure, a generator's locals, an iterator, a deque, a partial, an autograd graph), less the
model's parameters and buffers and the optimizer's state under its own keys, which the harness
leaves out by storage. The file cannot keep state where the walk does not go: on a class, a
module or a function (zerobook.trust.restricted refuses it; tests/test_policy.py)."""

import collections
import functools
import itertools
import types

import pytest
import torch

from zerobook.data_parallel.inflight import Handle, InFlight
from zerobook.labs.student_state import tensors
from zerobook.train import measure


def student_with(where: str):
    """A student's object over a model and an AdamW stepped once, which keeps one tensor
    (`kept`) in the place `where` names; the model, the optimizer, the kept tensor."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    model.register_buffer("mask", torch.ones(4))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    kept = torch.full((1000,), 7.0)
    student = type("Student", (), {})()
    student.model, student.optimizer = model, optimizer
    weight = model[0].weight
    if where == "a module's attribute":
        student.model.kept = [kept]
    elif where == "a module of its own":
        student.shelf = torch.nn.Module()
        student.shelf.kept = {"grads": kept}
    elif where == "a parameter's attribute":
        weight.kept = kept
    elif where == "the optimizer's attribute":
        optimizer.kept = kept
    elif where == "the optimizer's state, under a key of its own":
        optimizer.state[weight]["kept"] = kept
    elif where == "a buffer it registered":
        model.register_buffer("kept", kept)
    return student, model, optimizer, kept


PLACES = [
    "a module's attribute",
    "a module of its own",
    "a parameter's attribute",
    "the optimizer's attribute",
    "the optimizer's state, under a key of its own",
    "a buffer it registered",
]


FILE = "/course/student.py"  # the student's file, as its functions' code names it


def theirs(source: str, name: str):
    """Function `name` of `source`, compiled as the student's file's."""
    namespace = {}
    exec(compile(source, FILE, "exec"), namespace)
    return namespace[name]


KEEPER = theirs("def keeper(data):\n    return lambda: data\n", "keeper")
GENERATOR = theirs(
    "def hold(data):\n    kept = list(data)\n    while True:\n        yield\n", "hold"
)


def started(generator):
    next(generator)
    return generator


def graph_saving(kept):
    """A scalar whose graph saved `kept` (a leaf no Python name holds any more)."""
    leaf = kept.clone().requires_grad_()
    return (leaf * leaf).sum()


# a place Python keeps a reference that no attribute names: the kept tensor in a list, `[kept]`
HIDDEN = {
    "a closure of its file's": lambda kept: KEEPER([kept]),
    "a bound method of its file's": lambda kept: types.MethodType(KEEPER, [kept]),
    "a suspended generator's locals": lambda kept: started(GENERATOR([kept])),
    "a partial's arguments": lambda kept: functools.partial(max, [kept]),
    "a list iterator": lambda kept: iter([kept]),
    "a deque": lambda kept: collections.deque([kept]),
    "an itertools.cycle": lambda kept: itertools.cycle([kept]),
    "a map object": lambda kept: map(abs, [kept]),
    "a dict's items view": lambda kept: {0: kept}.items(),
    "an autograd graph's saved tensors": lambda kept: graph_saving(kept),
}


def module_of(**values) -> types.ModuleType:
    module = types.ModuleType("student")
    module.__file__ = FILE
    vars(module).update(values)
    return module


def counted(student, model, optimizer, module=None) -> int:
    """Bytes the walk finds that are not the model's or the optimizer's own."""
    own = [*model.parameters(), *list(model.buffers())[:1]]  # the mask: the model's
    own += [p.grad for p in model.parameters()]
    own += list(measure.own_optimizer_tensors(optimizer))
    seen = {measure.storage_key(t) for t in own}
    found = tensors([student], module or module_of(), model)
    return measure.unique_bytes(found, seen)


@pytest.mark.parametrize("where", PLACES)
def test_a_tensor_kept_on_torchs_objects_is_counted(where):
    student, model, optimizer, kept = student_with(where)
    assert counted(student, model, optimizer) == kept.untyped_storage().nbytes()


@pytest.mark.parametrize("where", sorted(HIDDEN))
@pytest.mark.parametrize("held_by", ["its object", "its file's globals"])
def test_a_tensor_kept_where_no_attribute_names_it_is_counted(where, held_by):
    student, model, optimizer, kept = student_with("nowhere")
    hidden = HIDDEN[where](kept)
    module = module_of()
    if held_by == "its object":
        student.hidden = hidden
    else:
        module.hidden = hidden
    expected = kept.untyped_storage().nbytes()
    assert counted(student, model, optimizer, module) >= expected


def test_an_honest_object_holds_nothing_beyond_the_models_and_optimizers():
    student, model, optimizer, _ = student_with("nowhere")
    assert counted(student, model, optimizer) == 0


def test_the_graders_hooks_and_functions_and_a_handles_record_are_not_the_students():
    """A function of another file (the grader's hook on the model, a library's closure) is
    not walked; a collective's handle counts its output only, not the run's record."""
    student, model, optimizer, kept = student_with("nowhere")
    grader = {"copies": [kept]}
    model[0].weight.register_post_accumulate_grad_hook(lambda p: grader)
    student.hook = lambda: grader
    with InFlight() as flight:
        flight.inputs = {0: kept}
        output = torch.zeros(10)
        student.handle = Handle(flight, 0, output, None)
        assert counted(student, model, optimizer) == output.untyped_storage().nbytes()


def test_the_optimizers_own_keys_are_read_off_torchs_class():
    """AdamW keeps step, exp_avg and exp_avg_sq (the harness's subclass too); SGD with
    momentum its momentum_buffer; a key another's code added is not among them."""
    param = torch.nn.Parameter(torch.ones(3))
    adamw = torch.optim.AdamW([param], lr=1e-3, weight_decay=0.1)
    sgd = torch.optim.SGD([param], lr=0.1, momentum=0.9)
    assert measure.state_keys(adamw) == {"step", "exp_avg", "exp_avg_sq"}
    assert measure.state_keys(sgd) == {"momentum_buffer"}
