"""Which member runs a shovel: every node computes the same answer from the
same members, shovels spread over the members, and when one member goes
only its shovels move."""

from __future__ import annotations

from node.shovel.manager import owner_of

MEMBERS = ["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"]
SHOVELS = [("/", f"s{i}") for i in range(300)]


def test_the_same_members_in_any_order_give_the_same_owner():
    for vhost, name in SHOVELS:
        assert owner_of(vhost, name, MEMBERS) == owner_of(vhost, name, list(reversed(MEMBERS)))
    assert owner_of("/", "s", []) is None


def test_shovels_spread_over_the_members():
    counts = {m: 0 for m in MEMBERS}
    for vhost, name in SHOVELS:
        counts[owner_of(vhost, name, MEMBERS)] += 1
    assert all(60 <= c <= 140 for c in counts.values()), counts


def test_a_member_gone_moves_only_its_own_shovels():
    gone = MEMBERS[1]
    rest = [m for m in MEMBERS if m != gone]
    for vhost, name in SHOVELS:
        before = owner_of(vhost, name, MEMBERS)
        after = owner_of(vhost, name, rest)
        assert after == before if before != gone else after in rest
