"""Exchanges, queues and bindings in the pure machine: RabbitMQ's rules
(equivalent redeclare, not-found, built-ins, cascades, auto-delete)."""

from __future__ import annotations

import pytest
from metadata_helpers import cluster, k, refused, run, step

from amqp.errors import Condition
from amqp.types import Long, Symbol, UInt
from metadata import commands as c
from metadata import effects as fx
from metadata.effects import CREATED, OK
from metadata.feature_flags import CONSISTENT_HASH_EXCHANGE, DELAYED_MESSAGE_EXCHANGE

NOT_FOUND = Condition.NOT_FOUND
PRECONDITION_FAILED = Condition.PRECONDITION_FAILED
INVALID_FIELD = Condition.INVALID_FIELD
NOT_ALLOWED = Condition.NOT_ALLOWED


def q(name: str, **kw) -> c.DeclareQueue:
    kw.setdefault("leader", "n1")
    return c.DeclareQueue(k(), "/", name, **kw)


def x(name: str, type: str = "direct", **kw) -> c.DeclareExchange:
    return c.DeclareExchange(k(), "/", name, type, **kw)


def b(source: str, dest: str, key: str = "", kind: str = "queue", **kw) -> c.Bind:
    return c.Bind(k(), "/", source, kind, dest, key, **kw)


def ub(source: str, dest: str, key: str = "", kind: str = "queue", **kw) -> c.Unbind:
    return c.Unbind(k(), "/", source, kind, dest, key, **kw)


@pytest.fixture
def state():
    return cluster("/")


# -- exchanges ---------------------------------------------------------------------


def test_declare_exchange(state):
    new, result, effects = step(state, x("e", "topic", durable=False, arguments={"alternate-exchange": "ae"}))
    assert result == CREATED
    assert effects == (fx.ExchangeDeclared("/", "e", "topic", False, False, False, {"alternate-exchange": "ae"}),)
    assert new.exchange("/", "e").arguments_map == {"alternate-exchange": "ae"}
    same, result, effects = step(new, x("e", "topic", durable=False, arguments={"alternate-exchange": "ae", "o": 1}))
    assert result == OK and effects == () and same.vhosts == new.vhosts  # other arguments are not compared


@pytest.mark.parametrize("changed", [
    dict(type="fanout"), dict(durable=False), dict(auto_delete=True), dict(internal=True),
    dict(arguments={"alternate-exchange": "other"}), dict(arguments={}),
])  # fmt: skip
def test_inequivalent_exchange_redeclare(state, changed):
    state = run(state, x("e", "topic", arguments={"alternate-exchange": "ae"}))
    args = dict(type="topic", arguments={"alternate-exchange": "ae"}) | changed
    result = refused(state, c.DeclareExchange(k(), "/", "e", **args), PRECONDITION_FAILED)
    assert "inequivalent arg" in result.description


def test_builtin_and_reserved_exchanges(state):
    assert step(state, x("amq.topic", "topic"))[1] == OK
    refused(state, x("amq.topic", "direct"), PRECONDITION_FAILED)
    refused(state, x("amq.custom"), NOT_ALLOWED)
    refused(state, x(""), NOT_ALLOWED)
    refused(state, c.DeleteExchange(k(), "/", "amq.direct"), NOT_ALLOWED)
    refused(state, c.DeleteExchange(k(), "/", ""), NOT_ALLOWED)


def test_exchange_validation(state):
    refused(state, x("e", "x-nonsense"), INVALID_FIELD)
    refused(state, x("e", arguments={"alternate-exchange": 5}), INVALID_FIELD)
    refused(state, x("e" * 256), INVALID_FIELD)
    refused(state, c.DeclareExchange(k(), "nowhere", "e"), NOT_FOUND)
    assert step(state, x("é" * 127))[1] == CREATED
    assert step(state, x("l", "x-local-random"))[1] == CREATED


def test_a_consistent_hash_exchange_needs_its_flag_and_valid_arguments():
    """Members without the flag would refuse the type: the machine must too."""
    state = cluster("/")
    error = refused(state, x("h", "x-consistent-hash"), Condition.NOT_IMPLEMENTED)
    assert "needs feature flag 'consistent_hash_exchange'" in error.description
    state = run(state, c.EnableFeatureFlag(k(), CONSISTENT_HASH_EXCHANGE))
    refused(state, x("h", "x-consistent-hash", arguments={"hash-property": "user_id"}), PRECONDITION_FAILED)
    state = run(state, x("h", "x-consistent-hash", arguments={"hash-header": "user"}))
    state = run(state, q("q"))
    assert "must be an integer" in refused(state, b("h", "q", "heavy"), PRECONDITION_FAILED).description
    assert step(state, b("h", "q", "3"))[1] == CREATED


def test_a_delayed_message_exchange_needs_its_flag_and_an_x_delayed_type():
    """Members without the flag would route delayed messages at once: the machine refuses the type until then."""
    state = cluster("/")
    delayed = {"x-delayed-type": "topic"}
    error = refused(state, x("d", "x-delayed-message", arguments=delayed), Condition.NOT_IMPLEMENTED)
    assert "needs feature flag 'delayed_message_exchange'" in error.description
    state = run(state, c.EnableFeatureFlag(k(), DELAYED_MESSAGE_EXCHANGE))
    assert "x-delayed-type" in refused(state, x("d", "x-delayed-message"), PRECONDITION_FAILED).description
    bad = refused(state, x("d", "x-delayed-message", arguments={"x-delayed-type": "x-delayed-message"}),
                  PRECONDITION_FAILED)  # fmt: skip
    assert "x-delayed-type" in bad.description
    assert step(state, x("d", "x-delayed-message", arguments=delayed))[1] == CREATED


def test_delete_exchange(state):
    refused(state, c.DeleteExchange(k(), "/", "missing"), NOT_FOUND)
    refused(state, c.DeleteExchange(k(), "nowhere", "missing"), NOT_FOUND)
    state = run(state, x("e", "fanout"), x("f"), q("q1"), b("e", "q1"), b("amq.direct", "e", "k", "exchange"),
                b("e", "f", "", "exchange"), b("e", "e", "", "exchange"))  # fmt: skip
    refused(state, c.DeleteExchange(k(), "/", "e", if_unused=True), PRECONDITION_FAILED)
    new, result, effects = step(state, c.DeleteExchange(k(), "/", "e"))
    assert result == OK and effects[0] == fx.ExchangeDeleted("/", "e")
    removed = {(e.source, e.destination) for e in effects if isinstance(e, fx.BindingRemoved)}
    assert removed == {("e", "q1"), ("amq.direct", "e"), ("e", "f"), ("e", "e")}
    assert new.exchange("/", "e") is None and new.bindings("/") == []
    assert new.exchange("/", "f") is not None
    # Unused: if_unused lets it go.
    assert step(new, c.DeleteExchange(k(), "/", "f", if_unused=True))[1] == OK


# -- queues ------------------------------------------------------------------------


def test_declare_queue(state):
    cmd = q("q", type="classic", durable=False, auto_delete=True, exclusive_owner="n1/c1",
            arguments={"x-max-length": UInt(3)}, replicas=("n1",))  # fmt: skip
    new, result, effects = step(state, cmd)
    assert result == CREATED
    assert effects == (fx.QueueDeclared("/", "q", "classic", False, True, "n1/c1", {"x-max-length": 3}, "n1",
                                        ("n1",)),)  # fmt: skip
    record = new.queue("/", "q")
    assert (record.leader, record.replicas, record.exclusive_owner) == ("n1", ("n1",), "n1/c1")
    assert type(record.arguments_map["x-max-length"]) is UInt


def test_equivalent_queue_redeclare(state):
    state = run(state, q("q", arguments={"x-max-length": UInt(3), "x-queue-type": Symbol("classic")}))
    # Equal values of other AMQP types are equivalent (RabbitMQ compares numbers by value);
    # the placement of a redeclare is ignored: the queue stays where it is.
    new, result, effects = step(state, q("q", arguments={"x-max-length": Long(3), "x-queue-type": "classic"},
                                         leader="n2"))  # fmt: skip
    assert result == OK and effects == () and new.queue("/", "q").leader == "n1"


@pytest.mark.parametrize("changed", [
    dict(durable=False), dict(auto_delete=True), dict(exclusive_owner="n1/c1"), dict(arguments={}),
    dict(arguments={"x-max-length": 4}), dict(type="quorum"),
])  # fmt: skip
def test_inequivalent_queue_redeclare(state, changed):
    state = run(state, q("q", arguments={"x-max-length": 3}))
    refused(state, q("q", **({"arguments": {"x-max-length": 3}} | changed)), PRECONDITION_FAILED)


@pytest.mark.parametrize("changed, named", [
    (dict(arguments={"x-max-length": 4}), "'x-max-length' for queue 'q' in vhost '/': received 4 but current is 3"),
    (dict(arguments={}), "'x-max-length' for queue 'q' in vhost '/': received 'none' but current is 3"),
    (dict(arguments={"x-max-length": 3, "x-expires": 9}), "'x-expires' for queue 'q' in vhost '/': received 9 "
                                                          "but current is 'none'"),
    (dict(arguments={"x-max-length": 3}, durable=False), "'durable' for queue 'q' in vhost '/': received 'false' "
                                                         "but current is 'true'"),
    (dict(arguments={"x-max-length": True}), "'x-max-length' for queue 'q' in vhost '/': received 'true'"),
])  # fmt: skip
def test_an_inequivalent_redeclare_names_the_argument_and_both_values(state, changed, named):
    state = run(state, q("q", arguments={"x-max-length": 3}))
    error = refused(state, q("q", **changed), PRECONDITION_FAILED)
    assert error.description.startswith("inequivalent arg " + named), error.description


def test_exclusive_queue_of_another_connection_is_locked(state):
    state = run(state, q("q", exclusive_owner="n1/c1"))
    assert step(state, q("q", exclusive_owner="n1/c1"))[1] == OK
    refused(state, q("q", exclusive_owner="n2/c7"), Condition.RESOURCE_LOCKED)


def test_queue_validation(state):
    refused(state, q(""), INVALID_FIELD)
    refused(state, q("q" * 256), INVALID_FIELD)
    refused(state, c.DeclareQueue(k(), "nowhere", "q", leader="n1"), NOT_FOUND)
    refused(state, q("q", arguments={"x-max-length": -1}), INVALID_FIELD)
    refused(state, q("q", arguments={"x-overflow": "sideways"}), INVALID_FIELD)
    refused(state, q("q", arguments={"x-queue-type": "quorum"}), INVALID_FIELD)
    refused(state, q("q", type="lazy"), INVALID_FIELD)
    refused(state, q("q", leader="n9"), INVALID_FIELD)
    refused(state, q("q", leader=""), INVALID_FIELD)
    refused(state, q("q", replicas=("n1", "n9")), INVALID_FIELD)
    refused(state, q("q", replicas=("n1", "n1")), INVALID_FIELD)


def test_quorum_queues_wait_for_their_feature_flag(state):
    cmd = q("qq", type="quorum", replicas=("n1", "n2"))
    refused(state, cmd, Condition.NOT_IMPLEMENTED)
    state = run(state, c.EnableFeatureFlag(k(), "quorum_queue_v1"))
    new, result, effects = step(state, q("qq", type="quorum", replicas=("n1", "n2")))
    assert result == CREATED and effects[0].replicas == ("n1", "n2")


def test_streams_wait_for_their_feature_flag_and_check_their_arguments(state):
    refused(state, q("s", type="stream"), Condition.NOT_IMPLEMENTED)
    state = run(state, c.EnableFeatureFlag(k(), "stream_queue"))
    refused(state, q("s", type="stream", arguments={"x-max-age": "7 days"}), INVALID_FIELD)
    refused(state, q("s", type="stream", arguments={"x-max-length-bytes": 0}), INVALID_FIELD)
    refused(state, q("s", type="stream", arguments={"x-stream-max-segment-size-bytes": "big"}), INVALID_FIELD)
    arguments = {"x-max-age": "7D", "x-max-length-bytes": 10**9, "x-stream-max-segment-size-bytes": 10**6}
    new, result, effects = step(state, q("s", type="stream", arguments=arguments))
    assert result == CREATED and effects[0].type == "stream" and dict(effects[0].arguments) == arguments


def test_delete_queue_removes_its_bindings_and_auto_delete_exchanges(state):
    state = run(
        state,
        q("q1"), q("q2"),
        x("ad1", "fanout", auto_delete=True),  # bound only to q1: goes with it
        x("ad2", "fanout", auto_delete=True),  # bound to ad1 only: goes next
        x("keep", "fanout", auto_delete=True),  # also bound to q2: stays
        b("ad1", "q1"), b("ad2", "ad1", kind="exchange"), b("keep", "q1"), b("keep", "q2"),
        b("amq.direct", "q1", "k"), b("amq.direct", "q1", "k2"),
    )  # fmt: skip
    new, result, effects = step(state, c.DeleteQueue(k(), "/", "q1"))
    assert result == OK and effects[0] == fx.QueueDeleted("/", "q1", "classic", "n1")
    deleted = [e.name for e in effects if isinstance(e, fx.ExchangeDeleted)]
    assert sorted(deleted) == ["ad1", "ad2"]
    assert sum(isinstance(e, fx.BindingRemoved) for e in effects) == 5
    assert {(bb.source, bb.destination) for bb in new.bindings("/")} == {("keep", "q2")}
    assert new.queue("/", "q1") is None and new.exchange("/", "keep") is not None
    refused(new, c.DeleteQueue(k(), "/", "q1"), NOT_FOUND)
    refused(new, c.DeleteQueue(k(), "nowhere", "q1"), NOT_FOUND)


# -- bindings ----------------------------------------------------------------------


def test_bind_and_unbind(state):
    state = run(state, q("q"))
    state, result, effects = step(state, b("amq.topic", "q", "a.*"))
    assert result == CREATED and effects == (fx.BindingAdded("/", "amq.topic", "queue", "q", "a.*", {}),)
    same, result, effects = step(state, b("amq.topic", "q", "a.*"))
    assert result == OK and effects == ()
    state, result, effects = step(state, ub("amq.topic", "q", "a.*"))
    assert result == OK and effects == (fx.BindingRemoved("/", "amq.topic", "queue", "q", "a.*", {}),)
    assert state.bindings("/") == []
    # Unbinding what is not bound is fine, as in RabbitMQ.
    assert step(state, ub("amq.topic", "q", "a.*"))[1:] == (OK, ())


def test_bindings_differ_by_arguments_compared_by_value(state):
    state = run(state, q("q"))
    state = run(state, b("amq.headers", "q", arguments={"x-match": "any", "h": UInt(1)}))
    assert step(state, b("amq.headers", "q", arguments={"x-match": "any", "h": 1}))[1] == OK
    state = run(state, b("amq.headers", "q", arguments={"x-match": "all", "h": 1}))
    assert len(state.bindings("/")) == 2
    state = run(state, ub("amq.headers", "q", arguments={"h": Long(1), "x-match": "any"}))
    [left] = state.bindings("/")
    assert left.arguments_map == {"x-match": "all", "h": 1}


def test_binding_validation(state):
    state = run(state, q("q"), x("e"), x("lr", "x-local-random"))
    refused(state, b("missing", "q"), NOT_FOUND)
    refused(state, b("e", "missing"), NOT_FOUND)
    refused(state, b("e", "missing", kind="exchange"), NOT_FOUND)
    refused(state, c.Bind(k(), "nowhere", "e", "queue", "q"), NOT_FOUND)
    refused(state, b("", "q"), NOT_ALLOWED)
    refused(state, b("e", "", kind="exchange"), NOT_ALLOWED)
    refused(state, b("e", "q", kind="stream"), INVALID_FIELD)
    refused(state, b("amq.headers", "q", arguments={"x-match": "some"}), PRECONDITION_FAILED)
    refused(state, b("lr", "q", "key"), PRECONDITION_FAILED)
    refused(state, b("lr", "e", kind="exchange"), PRECONDITION_FAILED)
    refused(state, ub("missing", "q"), NOT_FOUND)
    refused(state, ub("e", "missing"), NOT_FOUND)
    refused(state, ub("", "q"), NOT_ALLOWED)


def test_unbinding_the_last_binding_auto_deletes_the_source(state):
    state = run(state, q("q"), x("ad", "fanout", auto_delete=True), x("up", "fanout", auto_delete=True),
                b("ad", "q"), b("up", "ad", kind="exchange"))  # fmt: skip
    new, result, effects = step(state, ub("ad", "q"))
    assert result == OK
    assert [type(e).__name__ for e in effects] == ["BindingRemoved", "ExchangeDeleted", "BindingRemoved",
                                                   "ExchangeDeleted"]  # fmt: skip
    assert new.exchange("/", "ad") is None and new.exchange("/", "up") is None
    # An auto-delete exchange that never had a binding stays.
    assert run(state, x("fresh", auto_delete=True)).exchange("/", "fresh") is not None
