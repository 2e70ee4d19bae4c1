"""zb.pages.source.excerpt: the course's code as a page shows it, read when the cell runs."""

import pytest

from zerobook.pages.source import excerpt


def test_an_excerpt_is_cut_between_its_markers_and_headed_by_file_and_lines():
    from zerobook.zero import units

    shown = repr(excerpt(units.Unit.start_gather, start="def", stop="return"))
    head, *body = shown.splitlines()
    assert head.startswith("# zerobook/zero/units.py, lines ")
    first, last = map(int, head.rsplit(" ", 1)[1].split("–"))
    assert last - first + 1 == len(body) and body[0].startswith("def start_gather")
    assert body[-1].strip() == "return"
    assert (
        excerpt(units.Unit.free)._repr_markdown_().startswith("```python\n# zerobook/")
    )


def test_a_decorated_method_is_shown_from_its_own_file():
    from zerobook.zero import Zero3AdamW

    shown = repr(excerpt(Zero3AdamW.load_shard_state_dict))
    assert shown.startswith("# zerobook/zero/") and "def load_shard_state_dict" in shown


def test_a_marker_no_longer_in_the_source_fails_the_cell():
    from zerobook.zero import units

    with pytest.raises(ValueError, match="no longer in the source"):
        excerpt(units.Unit.free, start="a line that is not there")
    with pytest.raises(ValueError, match="one thing"):
        excerpt(units.Unit.free, units.Unit.start_gather, start="def")


def test_a_cut_never_leaves_a_bracket_open():
    """A stop marker inside a call's arguments takes the excerpt on to the call's end."""
    from zerobook.zero import hpz

    shown = repr(excerpt(hpz.hpz_unit, start="class HpzUnit", stop="group=node"))
    assert shown.splitlines()[-1].strip() == ")" and "return HpzUnit" not in shown
