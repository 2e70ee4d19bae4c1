"""An instructor's hidden parameters (labs/LAB/hidden_params.json in a private copy of labs/):
the harness takes them from the environment the classroom sets, and the lab's tests, which
read what the run reports, still grade the reference in full."""

import importlib
import json
import types

import pytest

import zerobook as zb
from conftest import ROOT
from zerobook.classroom.release import lab_names
from zerobook.labs.harness import PARAMS_ENV, lab_params

LABS = lab_names(ROOT / "labs")


def test_hidden_values_replace_the_defaults_and_a_wrong_key_or_type_says_which(
    monkeypatch,
):
    monkeypatch.setenv(PARAMS_ENV, json.dumps({"seed": 7}))
    assert lab_params(seed=1, steps=3) == {"seed": 7, "steps": 3}
    monkeypatch.setenv(PARAMS_ENV, json.dumps({"sed": 7}))
    with pytest.raises(
        ValueError, match=r"\['sed'\]: this lab's harness takes \['seed', 'steps'\]"
    ):
        lab_params(seed=1, steps=3)
    monkeypatch.setenv(PARAMS_ENV, json.dumps({"seed": "7"}))
    with pytest.raises(TypeError, match="seed='7': a int like 1"):
        lab_params(seed=1, steps=3)


def reference_reports(tmp_path, monkeypatch, lab: str, hidden: dict) -> list[dict]:
    """Each rank's report of lab `lab`'s reference solution graded with `hidden`."""
    student = tmp_path / f"{lab}_student.py"
    student.write_text(zb.grading.reference_script(ROOT / "labs", lab))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(PARAMS_ENV, json.dumps(hidden))
    return zb.grading.run_part(lab, str(student), "train", nproc=3).ranks


@pytest.mark.launch
def test_lab2_graded_with_another_cap_and_seed_reports_them_and_scores(
    tmp_path, monkeypatch
):
    """The reference DDP under a cap and seed the students never saw: the run reports the
    instructor's cap, other buckets, and the lab's own checks find nothing wrong."""
    from zerobook.labs import bucket_events

    hidden = {"bucket_cap_bytes": 40960, "seed": 99}
    reports = reference_reports(tmp_path, monkeypatch, "ddp", hidden)
    report = reports[0]
    assert report["bucket_cap_bytes"] == 40960
    for step in report["steps"]:
        expected = bucket_events.expected(step, report)
        assert len(expected) == 4  # 5 at the public 32 KiB
        assert not bucket_events.check_buckets(step, expected, report["params"])
        assert not bucket_events.check_overlap(step, len(expected))
        assert not bucket_events.check_waits(step)
    assert all(
        r["parity"]["diff"] == 0 and r["broadcast"]["diff"] == 0 for r in reports
    )


@pytest.mark.slow
def test_lab4_graded_with_another_cap_limit_and_seed_scores_in_full(
    tmp_path, monkeypatch
):
    """Lab 4's reference under a cap, an in-flight limit and a seed the students never
    saw: the run reports them, and every check of the lab's tests passes on every rank."""
    from zerobook.labs import zero_events, zero_held

    hidden = {"bucket_cap_bytes": 12 * 1024, "max_in_flight": 3, "seed": 99}
    reports = reference_reports(tmp_path, monkeypatch, "zero", hidden)
    assert reports[0]["bucket_cap_bytes"] == 12 * 1024
    assert reports[0]["max_in_flight"] == 3
    named = ("bucket", "overlap", "traffic")
    checks = [zero_held.held_problems]
    checks += [getattr(zero_events, f"{name}_problems") for name in named]
    for check in checks:
        assert not zero_events.first_problems(reports, check, (0, 1, 2)), check
    for rank, report in enumerate(reports):
        assert not zero_events.state_and_layout(report, rank)
        for name in report["runs"]:
            assert not zero_events.parity_problems(report, name)


@pytest.mark.slow
def test_lab5_graded_with_another_seed_scores_in_full(tmp_path, monkeypatch):
    """Lab 5's reference from a seed the students never saw: every check passes."""
    from zerobook.labs import zero3_events

    reports = reference_reports(tmp_path, monkeypatch, "zero3", {"seed": 99})
    assert reports[0]["seed"] == 99
    named = ("kept", "peak", "traffic", "forward", "backward")
    checks = [getattr(zero3_events, f"check_{name}") for name in named]
    for report in reports:
        assert not zero3_events.check_parity(report)
        for step in report["steps"]:
            for check in checks:
                assert not check(step, report), check


def test_the_guide_names_the_parameters_each_harness_takes():
    """book/instructors.md lists, per lab, the keys of its harness's lab_params call."""
    import ast

    guide = " ".join((ROOT / "book" / "instructors.md").read_text().split())
    numbers = {
        "ddp": 2,
        "zero": 4,
        "zero3": 5,
        "capstone": 7,
        "bug_zoo": 8,
        "zeropp": 9,
    }
    taking = {}
    for path in sorted((ROOT / "zerobook" / "labs").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if getattr(node, "func", None) and getattr(node.func, "id", "") == (
                "lab_params"
            ):
                taking[path.stem] = [k.arg for k in node.keywords]
    assert set(taking) == set(numbers), taking
    for lab, keys in taking.items():
        listed = ", ".join(f"`{key}`" for key in keys)
        assert f"Lab {numbers[lab]} {listed}" in guide, (lab, listed)


# state a harness changes as it runs, not a setting: the capstone's FreedCalls, made once
RUNTIME = {"capstone": {"GUARD"}}


def mutable(value) -> bool:
    """Whether `value` (a setting) holds a dict, list or set anywhere inside it."""
    if isinstance(value, (dict, list, set, bytearray)):
        return True
    if isinstance(value, types.MappingProxyType):
        value = list(value.values())
    return isinstance(value, (tuple, frozenset, list)) and any(map(mutable, value))


@pytest.mark.parametrize("lab", LABS)
def test_a_harness_settings_and_hidden_parameters_are_read_only(lab):
    """Issue 64's red team changed a harness's settings in place (weight decay off for the
    reference, the bug zoo's bugs off) and read its hidden parameters: the file cannot reach
    the harness now (zerobook.trust.policy), and its settings cannot be changed by any code."""
    harness = importlib.import_module(f"zerobook.labs.{lab}")
    settings = {
        name: value
        for name, value in vars(harness).items()
        if name.isupper() and name not in RUNTIME.get(lab, ())
    }
    assert not [name for name, value in settings.items() if mutable(value)]
    hidden = settings.get("HIDDEN", settings.get("PARAMS"))
    if hidden is not None:
        with pytest.raises(TypeError):
            hidden["seed"] = 0
