"""What the ZeRO labs count as held (Lab 4's zero_probe.tensors_in, Lab 5's and the capstone's
zero3_record.reachable): every tensor the student's object reaches, through torch's objects
too (a module, an optimizer, a tensor's own attributes), less the model's parameters and
buffers and the optimizer's state under its own keys, which the harness leaves out by storage.
The file cannot keep state where the walk does not go: on a class, a module or a function
(zerobook.trust.restricted refuses it; tests/test_policy.py)."""

import pytest
import torch

from zerobook.data_parallel.inflight import Handle
from zerobook.labs import zero_probe
from zerobook.labs.zero3_record import reachable
from zerobook.train import measure

WALKS = {
    "tensors_in": lambda root: list(zero_probe.tensors_in(root, Handle)),
    "reachable": reachable,
}


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


def counted(walk, student, model, optimizer) -> int:
    """Bytes the walk finds that are not the model's or the optimizer's own."""
    own = [*model.parameters(), *list(model.buffers())[:1]]  # the mask: the model's
    own += [p.grad for p in model.parameters()]
    own += list(measure.own_optimizer_tensors(optimizer))
    seen = {measure.storage_key(t) for t in own}
    return measure.unique_bytes(WALKS[walk](student), seen)


@pytest.mark.parametrize("walk", sorted(WALKS))
@pytest.mark.parametrize("where", PLACES)
def test_a_tensor_kept_on_torchs_objects_is_counted(walk, where):
    student, model, optimizer, kept = student_with(where)
    assert counted(walk, student, model, optimizer) == kept.untyped_storage().nbytes()


@pytest.mark.parametrize("walk", sorted(WALKS))
def test_an_honest_object_holds_nothing_beyond_the_models_and_optimizers(walk):
    student, model, optimizer, _ = student_with("nowhere")
    assert counted(walk, student, model, optimizer) == 0


def test_the_optimizers_own_keys_are_read_off_torchs_class():
    """AdamW keeps step, exp_avg and exp_avg_sq (the harness's subclass too); SGD with
    momentum its momentum_buffer; a key another's code added is not among them."""
    param = torch.nn.Parameter(torch.ones(3))
    adamw = torch.optim.AdamW([param], lr=1e-3, weight_decay=0.1)
    sgd = torch.optim.SGD([param], lr=0.1, momentum=0.9)
    assert measure.state_keys(adamw) == {"step", "exp_avg", "exp_avg_sq"}
    assert measure.state_keys(sgd) == {"momentum_buffer"}
