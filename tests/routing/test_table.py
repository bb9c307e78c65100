"""The routing table end to end: declarations, bindings, routing through
exchange graphs and alternate exchanges, cascading deletes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqp.errors import Condition
from routing.errors import InvalidArgument, NotAllowed, NotFound, PreconditionFailed, RoutingError
from routing.headers import headers_match
from routing.model import Binding, DestinationKind, ExchangeType
from routing.table import RoutingTable
from routing.topic import topic_matches


@pytest.fixture
def table():
    t = RoutingTable()
    for q in ("q1", "q2", "q3"):
        t.add_queue(q)
    return t


# -- built-ins and the default exchange ----------------------------------------


def test_builtin_exchanges():
    t = RoutingTable()
    types = {x.name: x.type for x in t.exchanges()}
    assert types == {
        "": ExchangeType.DIRECT,
        "amq.direct": ExchangeType.DIRECT,
        "amq.fanout": ExchangeType.FANOUT,
        "amq.topic": ExchangeType.TOPIC,
        "amq.headers": ExchangeType.HEADERS,
        "amq.match": ExchangeType.HEADERS,
    }
    assert all(x.durable for x in t.exchanges())


def test_default_exchange_routes_to_existing_queue(table):
    assert table.route("", "q1") == {"q1"}
    assert table.route("", "nope") == set()
    table.remove_queue("q1")
    assert table.route("", "q1") == set()


@pytest.mark.parametrize("name", ["", "amq.direct", "amq.topic", "amq.anything"])
def test_builtins_cannot_be_deleted(table, name):
    with pytest.raises(NotAllowed) as info:
        table.delete_exchange(name)
    assert info.value.condition == Condition.NOT_ALLOWED


def test_reserved_names_cannot_be_declared(table):
    with pytest.raises(NotAllowed):
        table.declare_exchange("amq.new", "direct")
    with pytest.raises(NotAllowed):
        table.declare_exchange("", "direct")


def test_builtin_redeclare_equivalent_is_ok(table):
    assert table.declare_exchange("amq.topic", "topic").name == "amq.topic"
    with pytest.raises(PreconditionFailed):
        table.declare_exchange("amq.topic", "direct")


def test_default_exchange_cannot_be_bound(table):
    with pytest.raises(NotAllowed):
        table.bind("", "queue", "q1", "q1")
    table.declare_exchange("x", "fanout")
    with pytest.raises(NotAllowed):
        table.bind("x", "exchange", "", "")
    with pytest.raises(NotAllowed):
        table.unbind("", "queue", "q1", "q1")


# -- declarations --------------------------------------------------------------


def test_declare_is_idempotent_and_checks_equivalence(table):
    x = table.declare_exchange("x", "topic", durable=True, arguments={"alternate-exchange": "ae", "other": 1})
    assert x.type is ExchangeType.TOPIC
    # other arguments do not take part in equivalence, as in RabbitMQ
    assert table.declare_exchange("x", "topic", arguments={"alternate-exchange": "ae"}) == x
    for kwargs in (
        {"type": "fanout"},
        {"durable": False},
        {"auto_delete": True},
        {"internal": True},
        {"arguments": {}},
        {"arguments": {"alternate-exchange": "other"}},
    ):
        call = {"type": "topic", "arguments": {"alternate-exchange": "ae"}, **kwargs}
        with pytest.raises(PreconditionFailed) as info:
            table.declare_exchange("x", **call)
        assert info.value.condition == Condition.PRECONDITION_FAILED


def test_declare_invalid(table):
    with pytest.raises(InvalidArgument) as info:
        table.declare_exchange("x", "x-recent-history")
    assert info.value.condition == Condition.INVALID_FIELD
    with pytest.raises(InvalidArgument):
        table.declare_exchange("x", "direct", arguments={"alternate-exchange": 42})
    with pytest.raises(InvalidArgument):
        table.declare_exchange("x" * 256, "direct")


def test_exchange_record_is_read_only(table):
    args = {"alternate-exchange": "ae"}
    x = table.declare_exchange("x", "direct", arguments=args)
    args["alternate-exchange"] = "changed"
    assert table.exchange("x").alternate_exchange == "ae"
    with pytest.raises(TypeError):
        x.arguments["k"] = 1  # type: ignore[index]
    assert table.exchange("missing") is None


# -- bindings ------------------------------------------------------------------


def test_bind_requires_existing_ends(table):
    with pytest.raises(NotFound) as info:
        table.bind("missing", "queue", "q1")
    assert info.value.condition == Condition.NOT_FOUND
    with pytest.raises(NotFound):
        table.bind("amq.direct", "queue", "missing")
    with pytest.raises(NotFound):
        table.bind("amq.direct", "exchange", "missing")
    with pytest.raises(InvalidArgument):
        table.bind("amq.direct", "topic", "q1")


def test_bind_is_idempotent_and_unbind_reports(table):
    assert table.bind("amq.direct", "queue", "q1", "k")
    assert not table.bind("amq.direct", "queue", "q1", "k")
    assert table.bind("amq.direct", "queue", "q1", "k", {"a": 1})  # other arguments: other binding
    assert len(table.list_bindings(source="amq.direct")) == 2
    assert table.unbind("amq.direct", "queue", "q1", "k")
    assert table.route("amq.direct", "k") == {"q1"}  # still bound through the other binding
    assert not table.unbind("amq.direct", "queue", "q1", "k")
    assert table.unbind("amq.direct", "queue", "q1", "k", {"a": 1})
    assert table.route("amq.direct", "k") == set()
    assert not table.unbind("missing", "queue", "q1", "k")


def test_list_bindings_filters(table):
    table.declare_exchange("x", "direct")
    table.bind("x", "queue", "q1", "a")
    table.bind("x", "queue", "q2", "b")
    table.bind("amq.fanout", "queue", "q1")
    table.bind("amq.fanout", "exchange", "x")
    b = Binding("x", DestinationKind.QUEUE, "q1", "a")
    assert table.list_bindings(source="x", destination_kind="queue", destination="q1", binding_key="a") == [b]
    assert {x.source for x in table.list_bindings(destination_kind="queue", destination="q1")} == {
        "x",
        "amq.fanout",
    }
    assert len(table.list_bindings()) == 4
    assert [x.destination for x in table.list_bindings(destination_kind="exchange")] == ["x"]
    assert table.list_bindings(binding_key="b") == [Binding("x", "queue", "q2", "b")]
    assert table.list_bindings(source="x", arguments={"k": 1}) == []
    assert len(table.list_bindings(source="x", arguments={})) == 2
    with pytest.raises(InvalidArgument):
        table.list_bindings(destination_kind="topic")


# -- routing by exchange type ---------------------------------------------------


def test_direct(table):
    table.bind("amq.direct", "queue", "q1", "k1")
    table.bind("amq.direct", "queue", "q2", "k1")
    table.bind("amq.direct", "queue", "q3", "k2")
    assert table.route("amq.direct", "k1") == {"q1", "q2"}
    assert table.route("amq.direct", "k2") == {"q3"}
    assert table.route("amq.direct", "k3") == set()


def test_fanout_ignores_key(table):
    table.bind("amq.fanout", "queue", "q1", "ignored")
    table.bind("amq.fanout", "queue", "q2")
    assert table.route("amq.fanout", "anything") == {"q1", "q2"}


def test_topic(table):
    table.bind("amq.topic", "queue", "q1", "eu.#")
    table.bind("amq.topic", "queue", "q2", "*.de.*")
    table.bind("amq.topic", "queue", "q3", "#")
    assert table.route("amq.topic", "eu.de.munich") == {"q1", "q2", "q3"}
    assert table.route("amq.topic", "us.de") == {"q3"}
    table.unbind("amq.topic", "queue", "q3", "#")
    assert table.route("amq.topic", "us.de") == set()


def test_headers(table):
    table.bind("amq.headers", "queue", "q1", "", {"x-match": "any", "a": 1, "b": 2})
    table.bind("amq.match", "queue", "q2", "", {"a": 1, "b": 2})
    table.bind("amq.headers", "queue", "q3", "", {"a": 1, "b": 2})
    assert table.route("amq.headers", "k", {"a": 1}) == {"q1"}
    assert table.route("amq.headers", "k", {"a": 1, "b": 2}) == {"q1", "q3"}
    assert table.route("amq.match", "k", {"a": 1, "b": 2}) == {"q2"}
    assert table.route("amq.headers", "k", None) == set()
    with pytest.raises(PreconditionFailed):
        table.bind("amq.headers", "queue", "q1", "", {"x-match": "some"})


def test_local_random_picks_one():
    picks = []

    def choice(pool):
        picks.append(tuple(d.name for d in pool))
        return pool[-1]

    t = RoutingTable(choice=choice)
    t.add_queue("a")
    t.add_queue("b")
    t.declare_exchange("lr", "x-local-random")
    assert t.route("lr", "k") == set()
    t.bind("lr", "queue", "a")
    assert t.route("lr", "k") == {"a"}
    assert picks == []  # a single queue needs no draw
    t.bind("lr", "queue", "b")
    assert t.route("lr", "k") == {"b"}
    assert picks == [("a", "b")]
    with pytest.raises(PreconditionFailed):
        t.bind("lr", "queue", "a", "non-empty")
    with pytest.raises(PreconditionFailed):
        t.bind("lr", "exchange", "amq.direct")


def test_local_random_prefers_the_publishers_node():
    """RabbitMQ's x-local-random: a queue on this node when one is bound, else any."""
    here: set[str] = set()
    t = RoutingTable("v", choice=lambda pool: pool[0], is_local=lambda vhost, q: vhost == "v" and q in here)
    for q in ("a", "b", "c"):
        t.add_queue(q)
        t.bind("amq.direct", "queue", q, q)  # other exchanges are not affected
    t.declare_exchange("lr", "x-local-random")
    for q in ("a", "b", "c"):
        t.bind("lr", "queue", q)
    assert t.route("lr", "k") == {"a"}  # none here: any
    here.add("c")
    assert t.route("lr", "k") == {"c"}
    here.add("b")
    assert t.route("lr", "k") == {"b"}  # among the local ones
    assert t.route("amq.direct", "a") == {"a"}


# -- exchange graphs ------------------------------------------------------------


def test_exchange_to_exchange(table):
    table.declare_exchange("x1", "topic")
    table.declare_exchange("x2", "direct")
    table.bind("x1", "exchange", "x2", "a.*")
    table.bind("x2", "queue", "q1", "a.b")
    table.bind("x2", "queue", "q2", "a.c")
    table.bind("x1", "queue", "q3", "#")
    assert table.route("x1", "a.b") == {"q1", "q3"}
    assert table.route("x1", "a.c") == {"q2", "q3"}
    assert table.route("x1", "b") == {"q3"}


def test_cycles_terminate(table):
    table.declare_exchange("x1", "fanout")
    table.declare_exchange("x2", "fanout")
    table.declare_exchange("x3", "fanout")
    table.bind("x1", "exchange", "x2")
    table.bind("x2", "exchange", "x3")
    table.bind("x3", "exchange", "x1")
    table.bind("x3", "exchange", "x3")
    assert table.route("x1", "k") == set()
    table.bind("x3", "queue", "q1")
    table.bind("x1", "queue", "q2")
    assert table.route("x2", "k") == {"q1", "q2"}


def test_diamond_delivers_once(table):
    for name in ("top", "left", "right", "bottom"):
        table.declare_exchange(name, "fanout")
    table.bind("top", "exchange", "left")
    table.bind("top", "exchange", "right")
    table.bind("left", "exchange", "bottom")
    table.bind("right", "exchange", "bottom")
    table.bind("bottom", "queue", "q1")
    assert table.route("top", "k") == {"q1"}


def test_alternate_exchange(table):
    table.declare_exchange("ae", "fanout")
    table.bind("ae", "queue", "q3")
    table.declare_exchange("x", "direct", arguments={"alternate-exchange": "ae"})
    table.bind("x", "queue", "q1", "k")
    assert table.route("x", "k") == {"q1"}
    assert table.route("x", "other") == {"q3"}


def test_alternate_exchange_missing_is_ignored(table):
    table.declare_exchange("x", "direct", arguments={"alternate-exchange": "gone"})
    assert table.route("x", "k") == set()


def test_alternate_exchange_chain_and_cycle(table):
    table.declare_exchange("a", "direct", arguments={"alternate-exchange": "b"})
    table.declare_exchange("b", "direct", arguments={"alternate-exchange": "a"})
    assert table.route("a", "k") == set()
    table.declare_exchange("c", "direct", arguments={"alternate-exchange": "c"})
    assert table.route("c", "k") == set()
    table.declare_exchange("d", "direct", arguments={"alternate-exchange": "a"})
    table.bind("b", "queue", "q2", "k")
    assert table.route("d", "k") == {"q2"}  # d -> a (nothing) -> b
    assert table.route("a", "k") == {"q2"}


def test_alternate_exchange_not_used_when_an_exchange_matched(table):
    # RabbitMQ: an exchange-to-exchange match counts as a destination even
    # when the downstream exchange routes nowhere.
    table.declare_exchange("ae", "fanout")
    table.bind("ae", "queue", "q3")
    table.declare_exchange("empty", "fanout")
    table.declare_exchange("x", "direct", arguments={"alternate-exchange": "ae"})
    table.bind("x", "exchange", "empty", "k")
    assert table.route("x", "k") == set()
    assert table.route("x", "j") == {"q3"}


def test_alternate_exchange_of_downstream_exchange(table):
    table.declare_exchange("ae", "fanout")
    table.bind("ae", "queue", "q3")
    table.declare_exchange("down", "direct", arguments={"alternate-exchange": "ae"})
    table.declare_exchange("up", "fanout")
    table.bind("up", "exchange", "down")
    table.bind("up", "queue", "q1")
    assert table.route("up", "k") == {"q1", "q3"}


def test_alternate_exchange_can_be_default_exchange(table):
    table.declare_exchange("x", "direct", arguments={"alternate-exchange": ""})
    assert table.route("x", "q2") == {"q2"}
    assert table.route("x", "nope") == set()


def test_route_missing_exchange(table):
    with pytest.raises(NotFound) as info:
        table.route("missing", "k")
    assert info.value.condition == Condition.NOT_FOUND
    assert info.value.description == "no exchange 'missing' in vhost '/'"


# -- deletes --------------------------------------------------------------------


def test_remove_queue_deletes_its_bindings(table):
    table.declare_exchange("x", "topic")
    table.bind("x", "queue", "q1", "#")
    table.bind("amq.fanout", "queue", "q1")
    table.bind("x", "queue", "q2", "#")
    assert table.remove_queue("q1")
    assert not table.remove_queue("q1")
    assert table.list_bindings(destination_kind="queue", destination="q1") == []
    assert table.route("x", "a") == {"q2"}
    assert table.route("amq.fanout", "a") == set()
    with pytest.raises(NotFound):
        table.bind("x", "queue", "q1", "#")
    table.add_queue("q1")  # a new queue of the same name starts unbound
    assert table.route("x", "a") == {"q2"}


def test_delete_exchange_deletes_bindings_both_ways(table):
    table.declare_exchange("x", "fanout")
    table.declare_exchange("y", "fanout")
    table.bind("x", "queue", "q1")
    table.bind("y", "exchange", "x")
    table.bind("x", "exchange", "y")
    table.bind("x", "exchange", "x")
    table.bind("y", "queue", "q2")
    assert table.delete_exchange("x")
    assert not table.delete_exchange("x")
    assert table.list_bindings() == [Binding("y", "queue", "q2")]
    assert table.route("y", "k") == {"q2"}
    table.declare_exchange("x", "direct")  # recreated empty, with another type
    assert table.route("x", "") == set()


def test_delete_if_unused(table):
    table.declare_exchange("x", "fanout")
    table.bind("x", "queue", "q1")
    with pytest.raises(PreconditionFailed):
        table.delete_exchange("x", if_unused=True)
    table.unbind("x", "queue", "q1")
    assert table.delete_exchange("x", if_unused=True)


def test_auto_delete_cascades(table):
    table.declare_exchange("a", "fanout", auto_delete=True)
    table.declare_exchange("b", "fanout", auto_delete=True)
    table.declare_exchange("keep", "fanout")
    table.bind("a", "exchange", "b")
    table.bind("keep", "exchange", "b")
    table.bind("b", "queue", "q1")
    assert table.exchange("a") is not None  # created without bindings, still there
    table.remove_queue("q1")  # b loses its last binding as a source
    assert table.exchange("b") is None
    assert table.exchange("a") is None  # a lost its only binding (to b)
    assert table.exchange("keep") is not None
    assert table.list_bindings() == []


def test_auto_delete_on_unbind(table):
    table.declare_exchange("x", "direct", auto_delete=True)
    table.bind("x", "queue", "q1", "k1")
    table.bind("x", "queue", "q1", "k2")
    table.unbind("x", "queue", "q1", "k1")
    assert table.exchange("x") is not None
    table.unbind("x", "queue", "q1", "k2")
    assert table.exchange("x") is None


def test_fast_path_invalidated_by_exchange_binding(table):
    table.declare_exchange("x", "fanout")
    table.declare_exchange("y", "fanout")
    table.bind("y", "queue", "q2")
    table.bind("x", "queue", "q1")
    assert table.route("x", "") == {"q1"}
    table.bind("x", "exchange", "y")
    assert table.route("x", "") == {"q1", "q2"}
    table.unbind("x", "exchange", "y")
    assert table.route("x", "") == {"q1"}


def test_queue_names(table):
    assert table.queues() == {"q1", "q2", "q3"}
    assert not table.add_queue("q1")
    assert table.has_queue("q1")
    with pytest.raises(InvalidArgument):
        table.add_queue("")


# -- model check: indexes agree with a scan of the bindings --------------------


def naive_route(table: RoutingTable, exchange: str, key: str, headers) -> set[str]:
    """Routing written from the rules, scanning every binding for every hop."""

    def binding_matches(exchange_type, b):
        if exchange_type is ExchangeType.DIRECT:
            return b.binding_key == key
        if exchange_type is ExchangeType.TOPIC:
            return topic_matches(b.binding_key, key)
        if exchange_type is ExchangeType.HEADERS:
            return headers_match(b.arguments, headers)
        return True  # fanout

    bindings = table.list_bindings()
    queues: set[str] = set()
    seen, pending = {exchange}, [exchange]
    while pending:
        x = table.exchange(pending.pop())
        if x is None:
            continue
        if x.name == "":
            matched = [Binding("", "queue", key)] if table.has_queue(key) else []
        else:
            matched = [b for b in bindings if b.source == x.name and binding_matches(x.type, b)]
        if not matched and x.alternate_exchange is not None and x.alternate_exchange not in seen:
            seen.add(x.alternate_exchange)
            pending.append(x.alternate_exchange)
        for b in matched:
            if b.destination_kind is DestinationKind.QUEUE:
                queues.add(b.destination)
            elif b.destination not in seen:
                seen.add(b.destination)
                pending.append(b.destination)
    return queues


EXCHANGES = ["x0", "x1", "x2", "x3", "amq.topic", "amq.headers"]
QUEUES = ["q0", "q1", "q2"]
KEYS = ["", "a", "a.b", "#", "*.b", "a.#"]
ARGS = [{}, {"x-match": "any", "h": 1}, {"h": None}, {"h": 2}]
TYPES = ["direct", "fanout", "topic", "headers"]

ops = st.one_of(
    st.tuples(st.just("declare"), st.sampled_from(EXCHANGES[:4]), st.sampled_from(TYPES),
              st.booleans(), st.sampled_from([None, *EXCHANGES, ""])),
    st.tuples(st.just("bind"), st.sampled_from(EXCHANGES), st.sampled_from(["queue", "exchange"]),
              st.sampled_from(QUEUES + EXCHANGES), st.sampled_from(KEYS), st.sampled_from(range(len(ARGS)))),
    st.tuples(st.just("unbind"), st.sampled_from(EXCHANGES), st.sampled_from(["queue", "exchange"]),
              st.sampled_from(QUEUES + EXCHANGES), st.sampled_from(KEYS), st.sampled_from(range(len(ARGS)))),
    st.tuples(st.just("delete"), st.sampled_from(EXCHANGES[:4])),
    st.tuples(st.just("add_queue"), st.sampled_from(QUEUES)),
    st.tuples(st.just("remove_queue"), st.sampled_from(QUEUES)),
)


def apply(table: RoutingTable, op) -> None:
    kind, *rest = op
    if kind == "declare":
        name, exchange_type, auto_delete, alternate = rest
        arguments = {"alternate-exchange": alternate} if alternate is not None else {}
        table.declare_exchange(name, exchange_type, auto_delete=auto_delete, arguments=arguments)
    elif kind in ("bind", "unbind"):
        source, dest_kind, dest, key, args = rest
        getattr(table, kind)(source, dest_kind, dest, key, ARGS[args])
    elif kind == "delete":
        table.delete_exchange(rest[0])
    elif kind == "add_queue":
        table.add_queue(rest[0])
    else:
        table.remove_queue(rest[0])


bind_ops = st.tuples(
    st.just("bind"), st.sampled_from(EXCHANGES), st.sampled_from(["queue", "exchange"]),
    st.sampled_from(QUEUES + EXCHANGES), st.sampled_from(KEYS), st.sampled_from(range(len(ARGS))),
)
setups = st.lists(
    st.tuples(st.sampled_from(TYPES), st.booleans(), st.sampled_from([None, *EXCHANGES, ""])),
    min_size=4, max_size=4,
)


@settings(max_examples=300)
@given(setups, st.lists(bind_ops, max_size=25), st.lists(ops, max_size=25))
def test_route_agrees_with_naive_scan(setup, binds, operations):
    table = RoutingTable()
    for queue in QUEUES:
        table.add_queue(queue)
    for name, (exchange_type, auto_delete, alternate) in zip(EXCHANGES, setup, strict=False):
        apply(table, ("declare", name, exchange_type, auto_delete, alternate))
    for op in binds + operations:
        try:
            apply(table, op)
        except RoutingError:
            pass
    for x in table.exchanges():
        for key in ["", "a", "a.b", "b.b"]:
            for headers in [None, {"h": 1}, {"h": 2}]:
                assert table.route(x.name, key, headers) == naive_route(table, x.name, key, headers)
    # the binding indexes agree with each other
    everything = table.list_bindings()
    by_destination = [
        b
        for kind, names in (("queue", QUEUES), ("exchange", EXCHANGES))
        for name in names
        for b in table.list_bindings(destination_kind=kind, destination=name)
    ]
    assert sorted(map(repr, everything)) == sorted(map(repr, by_destination))
    for b in everything:
        assert table.exchange(b.source) is not None
        if b.destination_kind is DestinationKind.QUEUE:
            assert table.has_queue(b.destination)
        else:
            assert table.exchange(b.destination) is not None


def test_a_policys_alternate_exchange_applies_unless_the_exchange_has_its_own(table):
    """RabbitMQ: the `alternate-exchange` argument overrules a policy's."""
    table.declare_exchange("ae", "fanout")
    table.bind("ae", "queue", "q3")
    table.declare_exchange("own-ae", "fanout")
    table.bind("own-ae", "queue", "q2")
    table.declare_exchange("x", "direct")
    table.declare_exchange("y", "direct", arguments={"alternate-exchange": "own-ae"})
    table.bind("x", "queue", "q1", "k")
    for name in ("x", "y"):
        table.set_policy_alternate(name, "ae")
    assert table.route("x", "k") == {"q1"}
    assert table.route("x", "other") == {"q3"}
    assert table.alternate_exchange("x") == "ae"
    assert table.route("y", "other") == {"q2"} and table.alternate_exchange("y") == "own-ae"
    table.set_policy_alternate("x", None)  # the policy went
    assert table.route("x", "other") == set()
    table.set_policy_alternate("", "ae")  # the default exchange has none
    assert table.route("", "nothing") == set() and table.alternate_exchange("") is None


def test_policy_alternate_exchanges_chain_and_stop_at_a_cycle(table):
    for name in ("a", "b", "c"):
        table.declare_exchange(name, "direct")
    table.set_policy_alternate("a", "b")
    table.set_policy_alternate("b", "c")
    table.set_policy_alternate("c", "a")
    assert table.route("a", "k") == set()  # a -> b -> c -> (a seen): stop
    table.bind("c", "queue", "q2", "k")
    assert table.route("a", "k") == {"q2"}
