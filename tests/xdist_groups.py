"""Tests marked `xdist_group` run on one worker under `--dist loadgroup`, on pytest 8 and 9.

pytest-xdist 3.8 tags each grouped test by assigning `item._nodeid = "<id>@<group>"`; pytest 9
reads a node's id from `item._id` instead, so the tag is lost: each test of a group goes to any
worker, and a module-scoped fixture they share (a whole class graded once, minutes) is built
again on every worker that gets one of them. This hook, run after xdist's, puts the tag where
this pytest reads it; where xdist's tag already took, it does nothing.
tests/test_xdist_groups.py checks that a group really lands on one worker.
"""

import pytest


def group_tag(item) -> str:
    """'@a_b' for an item marked xdist_group('a') and xdist_group('b'); '' if unmarked."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return "@" + "_".join(sorted(names)) if names else ""


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if not getattr(config.option, "loadgroup", False):  # set by xdist in each worker
        return
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9
    except ImportError:
        return  # pytest 8: xdist's own tag is read
    for item in items:
        tag = group_tag(item)
        if tag and not item.nodeid.endswith(tag):
            item._id = NodeId.parse(item.nodeid + tag)
