"""Projections: routing tables, users and permissions kept in
step with the machine. Built incrementally from effects or rebuilt from a
state, they must agree, after any sequence of valid and invalid commands."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metadata_helpers import ALL_FLAGS, cluster, k, run

from amqp.types import Long, UInt
from metadata import commands as c
from metadata.machine import MetadataMachine, apply
from metadata.projections import Projections
from metadata.snapshot import decode_state, encode_state
from metadata.state import MetadataState
from routing.errors import NotFound
from routing.permissions import Permission
from routing.users import Authenticator, hash_password


def pick_first(pool):
    return min(pool)  # x-local-random: the same pick whatever order the pool was built in


# -- random command sequences --------------------------------------------------------

VHOSTS = ("/", "v2")
QUEUES = ("q1", "q2", "q3")
EXCHANGES = ("x1", "x2", "x3", "amq.direct", "amq.topic", "amq.headers", "amq.fanout", "")
TYPES = ("direct", "fanout", "topic", "headers", "x-local-random", "bogus")
KEYS = ("", "a", "a.b", "#", "*.b", "a.#")
ARGS = ({}, {"x-match": "any", "h": 1}, {"x-match": "all", "h": UInt(1), "g": "v"}, {"h": Long(1)},
        {"x-match": "bogus"}, {"alternate-exchange": "x2"}, {"alternate-exchange": "x3", "x-max-length": 1})  # fmt: skip
USERS = ("alice", "bob")
MEMBERS = ("n1", "n2", "n3")

vh = st.sampled_from(VHOSTS)
queue = st.sampled_from(QUEUES)
exchange = st.sampled_from(EXCHANGES)
args = st.sampled_from(ARGS)
kind_dest = st.one_of(st.tuples(st.just("queue"), queue), st.tuples(st.just("exchange"), exchange))
# Mostly fresh keys; now and then one reused for another command (refused).
keys = st.integers(0, 39).map(lambda i: "clash" if i == 17 else k())


def _start() -> MetadataState:
    """Both vhosts with some topology, so that random commands often succeed."""
    state = cluster(*VHOSTS, members=("n1", "n2"))
    for v in VHOSTS:
        state = run(
            state,
            c.DeclareQueue(k(), v, "q1", leader="n1"),
            c.DeclareQueue(k(), v, "q2", leader="n2"),
            c.DeclareExchange(k(), v, "x1", "topic", arguments={"alternate-exchange": "x2"}),
            c.DeclareExchange(k(), v, "x2", "fanout", auto_delete=True),
            c.DeclareExchange(k(), v, "x3", "headers", auto_delete=True),
            c.Bind(k(), v, "x1", "queue", "q1", "a.#"),
            c.Bind(k(), v, "x2", "queue", "q2"),
            c.Bind(k(), v, "x3", "exchange", "x1", "", {"x-match": "any", "h": 1}),
            c.Bind(k(), v, "x1", "exchange", "x3", "#"),
        )
    return run(state, c.PutUser(k(), "alice", "h"), c.SetPermissions(k(), "alice", "/"))


START = _start()


@st.composite
def commands(draw):
    key = draw(keys)
    choice = draw(st.integers(0, 19))
    if choice == 0:
        return c.AddVHost(key, draw(vh))
    if choice == 1:
        return c.DeleteVHost(key, draw(vh))
    if choice in (2, 3):
        return c.DeclareExchange(key, draw(vh), draw(exchange), draw(st.sampled_from(TYPES)), True,
                                 draw(st.booleans()), False, draw(args))  # fmt: skip
    if choice == 4:
        return c.DeleteExchange(key, draw(vh), draw(exchange), draw(st.booleans()))
    if choice in (5, 6):
        return c.DeclareQueue(key, draw(vh), draw(queue), "classic", True, False, None,
                              draw(st.sampled_from(({}, {}, {"x-max-length": 5}, {"x-max-length": -1}))),
                              draw(st.sampled_from(MEMBERS)))  # fmt: skip
    if choice in (7, 8):
        return c.DeleteQueue(key, draw(vh), draw(queue))
    if choice in (9, 10, 11, 12, 13):
        kind, dest = draw(kind_dest)
        return c.Bind(key, draw(vh), draw(exchange), kind, dest, draw(st.sampled_from(KEYS)), draw(args))
    if choice in (14, 15):
        kind, dest = draw(kind_dest)
        return c.Unbind(key, draw(vh), draw(exchange), kind, dest, draw(st.sampled_from(KEYS)), draw(args))
    if choice == 16:
        return c.PutUser(key, draw(st.sampled_from(USERS)), draw(st.sampled_from(("h1", "h2"))))
    if choice == 17:
        return c.DeleteUser(key, draw(st.sampled_from(USERS)))
    if choice == 18:
        return c.SetPermissions(key, draw(st.sampled_from(USERS)), draw(vh), draw(st.sampled_from((".*", "^q", "("))))
    return c.ClearPermissions(key, draw(st.sampled_from(USERS)), draw(vh))


@st.composite
def sequences(draw):
    """Commands, some of them proposed again later (a retry after an unknown outcome)."""
    cmds = draw(st.lists(commands(), min_size=20, max_size=80))
    for at in draw(st.lists(st.integers(1, len(cmds)), max_size=5)):
        cmds.insert(at, cmds[draw(st.integers(0, at - 1))])
    return cmds


HEADERS = (None, {}, {"h": 1}, {"h": 1, "g": "v"}, {"h": 2})


def routes(p: Projections) -> dict:
    out = {}
    for vhost in p.tables:
        for ex in [*EXCHANGES, *QUEUES]:
            for key in (*KEYS, *QUEUES, "a.b.c"):
                for i, headers in enumerate(HEADERS):
                    try:
                        out[(vhost, ex, key, i)] = sorted(p.table(vhost).route(ex, key, headers))
                    except NotFound:
                        out[(vhost, ex, key, i)] = None
    return out


def tables(p: Projections) -> dict:
    return {
        vhost: (
            table.queues(),
            {x.name: (x.type, x.durable, x.auto_delete, x.internal, dict(x.arguments)) for x in table.exchanges()},
            sorted(
                (b.source, b.destination_kind, b.destination, b.binding_key, sorted(b.arguments.items()))
                for b in table.list_bindings()
            ),  # fmt: skip
        )
        for vhost, table in p.tables.items()
    }


def views(p: Projections) -> tuple:
    users = {n: (u.password_hash, u.tags) for n, u in p.users.items()}
    return (tables(p), p.vhosts, users, p.permissions, p.feature_flags, p.members, p.policies)


@given(sequences())
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_incremental_projections_agree_with_a_rebuild(cmds):
    start = START
    incremental = Projections.from_state(start, choice=pick_first)
    failures: list[Exception] = []

    def follow(*applied):
        try:
            incremental.on_applied(*applied)
        except Exception as e:  # the machine would only log it
            failures.append(e)
            raise

    machine = MetadataMachine(start, on_applied=follow)
    for i, cmd in enumerate(cmds, 1):
        machine.apply(cmd, i)
    assert failures == []
    state = machine.state
    rebuilt = Projections.from_state(state, choice=pick_first)
    assert views(incremental) == views(rebuilt)
    assert routes(incremental) == routes(rebuilt)
    assert incremental.applied_index == len(cmds)
    # Snapshots: exact round trip, and the same commands give the same bytes.
    data = encode_state(state)
    assert decode_state(data) == state and encode_state(decode_state(data)) == data
    again = start
    for cmd in cmds:
        again = apply(again, cmd)[0]
    assert encode_state(again) == data
    # The projections hold what the state holds.
    for vhost, vstate in state.vhosts.items():
        assert incremental.tables[vhost].queues() == frozenset(vstate.queues)
    assert set(incremental.permissions) == set(state.permissions)


# -- focused cases -----------------------------------------------------------------


def test_the_tables_route_to_queue_names():
    p = Projections()
    state = cluster("/")
    m = MetadataMachine(state, on_applied=p.on_applied)
    p.rebuild(state)
    for i, cmd in enumerate([
        c.DeclareQueue(k(), "/", "q1", leader="n1"),
        c.DeclareQueue(k(), "/", "q2", type="classic", leader="n2"),
        c.Bind(k(), "/", "amq.fanout", "queue", "q1"),
        c.Bind(k(), "/", "amq.fanout", "queue", "q2"),
    ], 1):  # fmt: skip
        assert m.apply(cmd, i).ok
    table = p.table("/")
    assert table.route("amq.fanout", "") == {"q1", "q2"}
    assert table.route("", "q2") == {"q2"}
    assert p.table("nope") is None
    with pytest.raises(NotFound):
        table.route("nope", "")


def test_users_and_permissions_reach_an_authenticator():
    auth = Authenticator(None, [])
    auth.add_user("stale", "pw")
    p = Projections(authenticator=auth)
    assert auth.users == {}
    state = cluster("/", "v2")
    p.rebuild(state)
    m = MetadataMachine(state, on_applied=p.on_applied)
    h = hash_password("secret", salt=b"\x00" * 16)
    cmds = [c.PutUser(k(), "alice", h, ("management",)), c.SetPermissions(k(), "alice", "/", "^q", ".*", ""),
            c.SetPermissions(k(), "alice", "v2")]  # fmt: skip
    for i, cmd in enumerate(cmds, 1):
        assert m.apply(cmd, i).ok
    assert auth.users["alice"].tags == ["management"] and p.users["alice"].password_hash == h
    assert auth.authenticate("PLAIN", b"\x00alice\x00secret", "10.0.0.1") == "alice"
    assert auth.permission("alice", "/") == p.permission("alice", "/") == Permission("^q", ".*", "")
    # A new password hash takes effect at once (the authenticator's check cache is dropped).
    assert m.apply(c.PutUser(k(), "alice", hash_password("other"), ()), 10).ok
    assert auth.authenticate("PLAIN", b"\x00alice\x00secret", "10.0.0.1") is None
    assert m.apply(c.DeleteVHost(k(), "v2"), 11).ok
    assert auth.permission("alice", "v2") is None and p.permission("alice", "v2") is None
    assert m.apply(c.DeleteUser(k(), "alice"), 12).ok
    assert auth.users == {} and auth.permissions == {} and p.users == {}
    # A fresh authenticator attached later gets everything at once.
    m.apply(c.PutUser(k(), "bob", h), 13)
    m.apply(c.SetPermissions(k(), "bob", "/"), 14)
    late = Authenticator(None, [])
    p.attach_authenticator(late)
    assert set(late.users) == {"bob"} and late.permission("bob", "/") == Permission()


def test_restore_rebuilds_the_projections():
    p = Projections()
    source = MetadataMachine(run(cluster("/"), c.DeclareQueue(k(), "/", "q", leader="n1"),
                                 c.Bind(k(), "/", "amq.direct", "queue", "q", "k")))  # fmt: skip
    target = MetadataMachine(on_applied=p.on_applied, on_restored=p.on_restored)
    target.restore(source.snapshot())
    assert p.table("/").route("amq.direct", "k") == {"q"}
    assert set(p.members) == {"n1", "n2"} and p.members["n1"].supported_flags == tuple(sorted(ALL_FLAGS))


def test_when_applied_waits_for_the_index():
    p = Projections()
    m = MetadataMachine(MetadataState(), on_applied=p.on_applied)
    fired = []
    p.when_applied(2, lambda: fired.append(2))
    p.when_applied(1, lambda: fired.append(1))
    p.when_applied(0, lambda: fired.append(0))
    assert fired == [0]
    m.apply(c.Fence(), 1)
    assert fired == [0, 1]
    m.apply(c.AddVHost(k(), "/"), 2)
    assert fired == [0, 1, 2] and "/" in p.vhosts
