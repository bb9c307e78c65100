"""The persistent map under the metadata state: a dict that never changes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.pmap import PMap

keys = st.one_of(st.text(max_size=4), st.tuples(st.text(max_size=3), st.text(max_size=3)))
ops = st.lists(st.tuples(st.booleans(), keys, st.integers()), max_size=300)


def test_set_and_discard_leave_the_original_alone():
    a = PMap({"x": 1})
    b = a.set("y", 2)
    c = b.discard("x")
    assert dict(a) == {"x": 1} and dict(b) == {"x": 1, "y": 2} and dict(c) == {"y": 2}
    assert len(a) == 1 and len(b) == 2 and len(c) == 1
    assert c.discard("absent") is c
    assert "y" in c and "x" not in c and ("a", "b") not in c and 5 not in c
    assert c.get("x", 7) == 7 and c["y"] == 2


def test_existing_key_keeps_its_place():
    m = PMap([(f"k{i}", i) for i in range(2000)])
    order = list(m)
    assert list(m.set("k5", -1)) == order
    assert m.set("k5", -1)["k5"] == -1


@given(ops)
@settings(max_examples=150, deadline=None)
def test_behaves_like_a_dict_and_rebuilds_in_the_same_order(operations):
    m: PMap = PMap()
    d: dict = {}
    for is_set, key, value in operations:
        if is_set:
            m = m.set(key, value)
            d[key] = value
        else:
            m = m.discard(key)
            d.pop(key, None)
    assert dict(m.items()) == d and len(m) == len(d) and m == d
    again = PMap(m.items())
    assert list(again.items()) == list(m.items())
    # Order depends only on the operations, never on Python's hash seed: a
    # later insert lands in the same place in both.
    assert list(again.set("zz", 0).items()) == list(m.set("zz", 0).items())
