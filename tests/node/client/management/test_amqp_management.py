"""The /management node, driven by RabbitMQ's own AMQP 1.0 client
(rabbitmq-amqp-python-client) against a real node: topology through the
link pair, then publishing and consuming through what it declared."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from proton import Link, Message, PropertyDict, Timeout, symbol
from proton.reactor import LinkOption
from proton.utils import BlockingConnection, LinkDetached
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AmqpMessageRejectedException,
    ClassicQueueSpecification,
    ExchangeCustomSpecification,
    ExchangeSpecification,
    ExchangeToExchangeBindingSpecification,
    ExchangeToQueueBindingSpecification,
    ExchangeType,
    StreamSpecification,
    ValidationCodeException,
)
from rabbitmq_amqp_python_client import Message as ClientMessage
from rabbitmq_amqp_python_client.qpid.proton.utils import LinkDetached as ClientLinkDetached
from rmq_client import ACCEPT, DISCARD, REQUEUE, connection, consume, request

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def broker(broker_factory):
    return broker_factory(http_port=-1, metrics_port=-1)


def q_addr(name: str) -> str:
    return AddressHelper.queue_address(name)


def publish(conn, address: str, *bodies: bytes) -> None:
    p = conn.publisher(address)
    for body in bodies:
        p.publish(ClientMessage(body=body))
    p.close()


# ---------------------------------------------------------------- handshake


def test_the_client_accepts_the_node_and_product_is_configurable(broker_factory, tmp_path):
    b = broker_factory(http_port=-1, metrics_port=-1)
    with connection(b.port) as conn:
        props = conn._conn.conn.remote_properties
        assert props["product"] == "RabbitMQ" and props["version"].startswith("4.2.0+warren.")
        assert conn._is_server_version_gte("4.2.0")
        caps = [str(c) for c in conn._conn.conn.remote_offered_capabilities]
        assert "LINK_PAIR_V1_0" in caps and "ANONYMOUS-RELAY" in caps
    older = broker_factory(tmp_path / "older", http_port=-1, metrics_port=-1, product_version="4.1.3")
    with connection(older.port) as conn:
        assert conn._conn.conn.remote_properties["version"].startswith("4.1.3+warren.")
        assert not conn._is_server_version_gte("4.2.0")
    other = broker_factory(tmp_path / "other", http_port=-1, metrics_port=-1, product="Warren")
    with pytest.raises(ValidationCodeException, match="non-RabbitMQ"):
        with connection(other.port):
            pass


# ---------------------------------------------------------------- exchanges


def test_declare_and_delete_exchanges_of_every_type(broker):
    routing = broker.vhost.routing
    with connection(broker.port) as conn:
        m = conn.management()
        for kind in ExchangeType:
            m.declare_exchange(ExchangeSpecification(name=f"x-{kind.value}", exchange_type=kind))
            assert routing.exchange(f"x-{kind.value}").type == kind.value
        m.declare_exchange(ExchangeCustomSpecification(name="x-random", exchange_type="x-local-random"))
        assert routing.exchange("x-random").type == "x-local-random"
        # redeclaring the same is fine (204), another type is 409
        m.declare_exchange(ExchangeSpecification(name="x-topic", exchange_type=ExchangeType.topic))
        with pytest.raises(ValidationCodeException, match="ErrPreconditionFailed"):
            m.declare_exchange(ExchangeSpecification(name="x-topic", exchange_type=ExchangeType.fanout))
        assert request(m, "PUT", "/exchanges/odd", {"type": "no-such-type"})[0] == 400
        assert request(m, "PUT", "/exchanges/odd", {"type": "direct", "colour": "red"})[0] == 400
        assert request(m, "PUT", "/exchanges/amq.mine", {"type": "direct"}) == (
            403, "exchange 'amq.mine' in vhost '/' starts with reserved prefix 'amq.'")  # fmt: skip
        assert request(m, "PUT", "/exchanges/", {"type": "direct"}) == (
            403, "operation not permitted on the default exchange")  # fmt: skip
        assert request(m, "PUT", "/exchanges/amq.direct", {"type": "direct"})[0] == 204  # equivalent: fine
        assert request(m, "DELETE", "/exchanges/amq.fanout")[0] == 403
        assert request(m, "PUT", "/exchanges/line%0Abreak", {"type": "direct"})[0] == 400
        m.delete_exchange("x-direct")
        assert routing.exchange("x-direct") is None
        m.delete_exchange("x-direct")  # deleting an absent exchange is 204 too


# ---------------------------------------------------------------- queues


def test_declare_queue_with_arguments_and_read_its_info(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        spec = ClassicQueueSpecification(name="args-q", max_len=10, max_len_bytes=10_000,
                                         message_ttl=timedelta(seconds=60),
                                         dead_letter_exchange="dlx", overflow_behaviour="reject-publish")  # fmt: skip
        m.declare_queue(spec)
        info = m.queue_info("args-q")
        assert (info.name, info.queue_type.value, info.is_durable) == ("args-q", "classic", True)
        assert not info.is_exclusive
        assert info.arguments == {"x-max-length": 10, "x-max-length-bytes": 10_000, "x-message-ttl": 60_000,
                                  "x-dead-letter-exchange": "dlx", "x-overflow": "reject-publish",
                                  "x-queue-type": "classic"}  # fmt: skip
        node = broker.broker.config.node_name  # the leader, by node name as RabbitMQ
        assert info.leader == node and list(info.members) == [node]
        assert (info.message_count, info.consumer_count) == (0, 0)
        assert broker.queue("args-q").config.max_length == 10
        # an unknown x- argument is kept and given back unchanged
        status, body = request(m, "PUT", "/queues/custom", {"arguments": {"x-custom": "kept", "x-n": 7}})
        assert status == 201 and body["arguments"] == {"x-custom": "kept", "x-n": 7}
        assert body["durable"] is True and body["type"] == "classic" and body["vhost"] == "/"
        # redeclaring: equivalent is 200 (x-queue-type defaults to classic), inequivalent 409
        redeclare = {"arguments": {"x-custom": "ignored", "x-queue-type": "classic"}}
        status, body = request(m, "PUT", "/queues/custom", redeclare)
        assert status == 200 and body["arguments"]["x-custom"] == "kept"
        assert request(m, "PUT", "/queues/custom", {"durable": False}) == (
            409, "inequivalent arg 'durable' for queue 'custom' in vhost '/': received 'false' but current is 'true'")  # fmt: skip
        with pytest.raises(ValidationCodeException, match="ErrPreconditionFailed"):
            m.declare_queue(ClassicQueueSpecification(name="args-q", max_len=11))
        m.declare_queue(spec)  # the same again: fine


def test_queue_declaration_refusals(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        status, body = request(m, "PUT", "/queues/bad", {"arguments": {"x-max-length": -1}})
        assert status == 400 and "x-max-length" in body
        assert request(m, "PUT", "/queues/bad", {"arguments": {"x-overflow": "sideways"}})[0] == 400
        assert request(m, "PUT", "/queues/bad", {"durable": "yes"})[0] == 400
        assert request(m, "PUT", "/queues/bad", {"colour": "red"})[0] == 400
        assert request(m, "PUT", "/queues/bad", "not a map")[0] == 400
        assert request(m, "PUT", "/queues/", {}) == (400, "declare queue with empty name not allowed")
        assert request(m, "PUT", "/queues/amq.q", {})[0] == 403
        assert request(m, "PUT", "/queues/a%0Db", {})[0] == 400
        assert request(m, "PUT", "/queues/raw space", {})[0] == 400  # names are percent-encoded
        # streams: declared with their arguments checked, and only durable and shared
        assert request(m, "PUT", "/queues/sq", {"arguments": {"x-queue-type": "stream", "x-max-age": "7 days"}})[0] == 400
        assert request(m, "PUT", "/queues/sq", {"exclusive": True, "arguments": {"x-queue-type": "stream"}})[0] == 400
        m.declare_queue(StreamSpecification(name="sq", max_len_bytes=10**9, max_age=timedelta(hours=1)))
        assert broker.vhost.queues["sq"].type_name == "stream"
        assert request(m, "PUT", "/queues/odd", {"arguments": {"x-queue-type": "odd"}})[0] == 400
        assert "bad" not in broker.vhost.queues


def test_unknown_paths_methods_and_missing_queues(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        assert request(m, "GET", "/queues/nope") == (404, "queue 'nope' in vhost '/' not found")
        assert request(m, "DELETE", "/queues/nope/messages")[0] == 404
        assert request(m, "GET", "/vhosts")[0] == 404
        assert request(m, "GET", "/queues/a/b/c")[0] == 404
        assert request(m, "PATCH", "/queues/nope")[0] == 405
        assert request(m, "POST", "/queues/nope")[0] == 405
        assert request(m, "GET", "no-slash")[0] == 400
        # deleting an absent queue is not an error, as in RabbitMQ
        assert request(m, "DELETE", "/queues/nope") == (200, {"message_count": 0})
        m.delete_queue("nope")


# ---------------------------------------------------------------- publish and consume


def test_publish_to_queue_exchange_and_per_message_addresses(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        m.declare_queue(ClassicQueueSpecification(name="dest"))
        m.declare_exchange(ExchangeSpecification(name="ex", exchange_type=ExchangeType.direct))
        m.bind(ExchangeToQueueBindingSpecification(source_exchange="ex", destination_queue="dest", binding_key="k"))
        publish(conn, q_addr("dest"), b"to-queue")
        publish(conn, AddressHelper.exchange_address("ex", "k"), b"to-exchange-key")
        p = conn.publisher(AddressHelper.exchange_address("ex"))  # routing key from the subject
        p.publish(ClientMessage(body=b"by-subject", subject="k"))
        p.close()
        anonymous = conn.publisher()
        for address, body in ((q_addr("dest"), b"anon-queue"), (AddressHelper.exchange_address("ex", "k"), b"anon-ex")):
            anonymous.publish(AddressHelper.message_to_address_helper(ClientMessage(body=body), address))
        assert m.queue_info("dest").message_count == 5
        got = consume(conn, q_addr("dest"), 5)
        assert [g.body for g in got] == [b"to-queue", b"to-exchange-key", b"by-subject", b"anon-queue", b"anon-ex"]
        assert m.queue_info("dest").message_count == 0
        # invalid per-message destinations are rejected, the link lives on
        for address in (q_addr("missing"), "/queues/a/b", "/exchanges/missing"):
            with pytest.raises(AmqpMessageRejectedException):
                anonymous.publish(AddressHelper.message_to_address_helper(ClientMessage(body=b"x"), address))
        anonymous.publish(AddressHelper.message_to_address_helper(ClientMessage(body=b"last"), q_addr("dest")))
        anonymous.close()
        assert m.queue_info("dest").message_count == 1


def test_invalid_destinations_on_attach(broker):
    with connection(broker.port) as conn:
        for address in (q_addr("missing"), AddressHelper.exchange_address("missing")):
            with pytest.raises(ClientLinkDetached, match="amqp:not-found"):
                conn.publisher(address)
        with pytest.raises(ClientLinkDetached, match="amqp:not-found"):
            conn.consumer(q_addr("missing"))
        with pytest.raises(ClientLinkDetached, match="amqp:invalid-field"):
            conn.publisher("/queues/a/b")
        m = conn.management()  # the connection is fine
        status, body = request(m, "POST", "/bindings", {"source": "amq.direct", "destination_queue": "missing",
                                                        "binding_key": "k", "arguments": {}})  # fmt: skip
        assert status == 404 and "missing" in body


def test_consume_with_accept_requeue_and_discard(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        m.declare_exchange(ExchangeSpecification(name="dlx", exchange_type=ExchangeType.fanout))
        m.declare_queue(ClassicQueueSpecification(name="dead"))
        m.bind(ExchangeToQueueBindingSpecification(source_exchange="dlx", destination_queue="dead"))
        m.declare_queue(ClassicQueueSpecification(name="work", dead_letter_exchange="dlx"))
        publish(conn, q_addr("work"), b"accept", b"requeue", b"discard", b"discard+", b"requeue+")
        seen: dict[bytes, int] = {}

        def decide(msg):
            seen[msg.body] = seen.get(msg.body, 0) + 1
            first = seen[msg.body] == 1
            return {
                b"accept": ACCEPT,
                b"requeue": REQUEUE if first else ACCEPT,
                b"discard": DISCARD,
                b"discard+": (DISCARD, {"x-opt-why": "broken"}),
                b"requeue+": (REQUEUE, {"x-opt-tries": 1}) if first else ACCEPT,
            }[msg.body]

        got = consume(conn, q_addr("work"), 7, decide)
        assert sorted(g.body for g in got) == sorted(
            [b"accept", b"requeue", b"requeue", b"discard", b"discard+", b"requeue+", b"requeue+"])  # fmt: skip
        again = [g for g in got if g.body == b"requeue+"][1]
        assert again.annotations["x-opt-tries"] == 1  # requeued with annotations: they stay on the message
        assert m.queue_info("work").message_count == 0
        dead = consume(conn, q_addr("dead"), 2)
        assert sorted(d.body for d in dead) == [b"discard", b"discard+"]
        with_why = next(d for d in dead if d.body == b"discard+")
        assert with_why.annotations["x-opt-why"] == "broken"
        assert with_why.annotations["x-first-death-reason"] == "rejected"


def test_purge_and_delete_report_message_counts(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        m.declare_queue(ClassicQueueSpecification(name="counted"))
        publish(conn, q_addr("counted"), b"1", b"2", b"3")
        assert m.purge_queue("counted") == 3
        assert m.purge_queue("counted") == 0
        publish(conn, q_addr("counted"), b"4", b"5")
        assert request(m, "DELETE", "/queues/counted") == (200, {"message_count": 2})
        assert "counted" not in broker.vhost.queues


def test_deleting_a_queue_detaches_its_consumers(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        m.declare_queue(ClassicQueueSpecification(name="doomed"))
        pc = BlockingConnection(broker.url, timeout=10)
        receiver = pc.create_receiver("/queues/doomed", credit=5)
        m.delete_queue("doomed")
        with pytest.raises(LinkDetached, match="amqp:resource-deleted"):
            receiver.receive(timeout=5)
        pc.close()


# ---------------------------------------------------------------- bindings


def test_bind_and_unbind_by_spec_by_path_and_by_location(broker):
    v = broker.vhost
    with connection(broker.port) as conn:
        m = conn.management()
        m.declare_queue(ClassicQueueSpecification(name="bq"))
        m.declare_exchange(ExchangeSpecification(name="src", exchange_type=ExchangeType.topic))
        m.declare_exchange(ExchangeSpecification(name="mid", exchange_type=ExchangeType.fanout))
        spec = ExchangeToQueueBindingSpecification(source_exchange="src", destination_queue="bq", binding_key="a.*")
        path = m.bind(spec)
        assert path == "/bindings/src=src;dstq=bq;key=a.%2A;args="
        m.bind(spec)  # idempotent
        assert [b.binding_key for b in v.routing.list_bindings(source="src")] == ["a.*"]
        status, body = request(m, "GET", "/bindings?src=src&dstq=bq&key=a.%2A")
        assert status == 200 and body == [{"source": "src", "destination_queue": "bq", "binding_key": "a.*",
                                           "arguments": {}, "location": path}]  # fmt: skip
        assert request(m, "GET", path) == (200, body[0])
        m.unbind(spec)
        assert v.routing.list_bindings(source="src") == []
        assert request(m, "GET", path)[0] == 404
        m.unbind(spec)  # an absent binding: 204 as well
        # exchange to exchange; unbound through the path (dste=)
        m.bind(ExchangeToExchangeBindingSpecification(source_exchange="src", destination_exchange="mid",
                                                      binding_key="#"))  # fmt: skip
        m.bind(ExchangeToQueueBindingSpecification(source_exchange="mid", destination_queue="bq"))
        publish(conn, AddressHelper.exchange_address("src", "x.y"), b"via-mid")
        assert m.queue_info("bq").message_count == 1
        m.unbind("/bindings/src=src;dste=mid;key=%23;args=")
        assert v.routing.list_bindings(source="src") == []
        # bindings with arguments are named by a hash of them: use `location`
        args = {"x-match": "any", "k": "v"}
        assert request(m, "POST", "/bindings", {"source": "amq.headers", "destination_queue": "bq",
                                                "binding_key": "", "arguments": args})[0] == 204  # fmt: skip
        status, found = request(m, "GET", "/bindings?src=amq.headers&dstq=bq&key=")
        assert status == 200 and found[0]["arguments"] == args and found[0]["location"] != path
        assert request(m, "DELETE", found[0]["location"])[0] == 204
        assert v.routing.list_bindings(source="amq.headers") == []


def test_binding_refusals(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        m.declare_queue(ClassicQueueSpecification(name="bq"))
        default = {"source": "", "destination_queue": "bq", "binding_key": "bq", "arguments": {}}
        assert request(m, "POST", "/bindings", default) == (403, "operation not permitted on the default exchange")
        assert request(m, "POST", "/bindings", {"source": "amq.direct", "binding_key": "k"})[0] == 400
        assert request(m, "POST", "/bindings", {"source": "amq.direct", "destination_queue": "bq",
                                                "binding_key": 5})[0] == 400  # fmt: skip
        assert request(m, "POST", "/bindings", {"source": "missing", "destination_queue": "bq"})[0] == 404
        bad_match = {"source": "amq.headers", "destination_queue": "bq", "arguments": {"x-match": "most"}}
        assert request(m, "POST", "/bindings", bad_match)[0] == 400
        assert request(m, "DELETE", "/bindings/src=e1;dstq=q1;invalidkey=k1;args=") == (
            400, "bad binding path segment 'src=e1;dstq=q1;invalidkey=k1;args='")  # fmt: skip
        assert request(m, "GET", "/bindings?src=amq.direct")[0] == 400


# ---------------------------------------------------------------- vhosts, exclusivity


def test_connect_to_a_vhost_and_to_a_missing_one(broker, caplog):
    caplog.set_level("INFO", logger="warren.connection")
    broker.add_vhost("v1")
    broker.set_permissions("guest", "v1")
    with connection(broker.port, vhost="v1") as conn:
        m = conn.management()
        m.declare_queue(ClassicQueueSpecification(name="in-v1"))
        publish(conn, q_addr("in-v1"), b"hello v1")
        assert m.queue_info("in-v1").message_count == 1
    assert "in-v1" in broker.broker.vhosts["v1"].queues and "in-v1" not in broker.vhost.queues
    with pytest.raises(BaseException, match="disconnected"):
        with connection(broker.port, vhost="nowhere"):
            pass
    assert "virtual host 'nowhere' does not exist" in caplog.text


def test_exclusive_queues_belong_to_their_connection(broker):
    with connection(broker.port) as owner, connection(broker.port) as other:
        mo, mx = owner.management(), other.management()
        mo.declare_queue(ClassicQueueSpecification(name="mine", is_exclusive=True, is_durable=False))
        assert mo.queue_info("mine").is_exclusive
        for method, path, body in (("PUT", "/queues/mine", {"exclusive": True, "durable": False}),
                                   ("DELETE", "/queues/mine/messages", None), ("DELETE", "/queues/mine", None)):  # fmt: skip
            status, reason = request(mx, method, path, body)
            assert status == 400 and "cannot obtain exclusive access to locked queue 'mine'" in reason
        assert request(mo, "PUT", "/queues/mine", {"exclusive": False, "durable": False})[0] == 400
        with pytest.raises(ClientLinkDetached, match="resource-locked"):
            other.consumer(q_addr("mine"))
        owner.close()
    deadline = time.time() + 5
    while "mine" in broker.vhost.queues and time.time() < deadline:
        time.sleep(0.01)
    assert "mine" not in broker.vhost.queues


# ---------------------------------------------------------------- the link pair itself


class Paired(LinkOption):
    """A management link half as Link Pair CS 01 wants it."""

    def __init__(self, paired: bool = True):
        self.paired = paired

    def apply(self, link) -> None:
        if self.paired:
            link.properties = PropertyDict({symbol("paired"): True})
        if link.is_sender:
            link.snd_settle_mode = Link.SND_SETTLED


def test_replies_wait_for_credit_and_come_back_in_order(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    sender = conn.create_sender("/management", name="pair", options=Paired())
    receiver = conn.create_receiver("/management", name="pair", credit=0, options=Paired())
    for i in range(6):
        sender.send(Message(id=f"req-{i}", subject="PUT", address=f"/queues/piped-{i}", reply_to="$me",
                            body={"durable": False}))  # fmt: skip
    with pytest.raises(Timeout):  # no credit, no reply
        conn.wait(lambda: receiver.fetcher.has_message, timeout=0.3)
    assert len(broker.vhost.queues) == 6  # the requests were served meanwhile
    receiver.link.flow(6)
    replies = [receiver.receive(timeout=10) for _ in range(6)]
    assert [(r.correlation_id, r.subject) for r in replies] == [(f"req-{i}", "201") for i in range(6)]
    assert replies[0].properties == {"http:response": "1.1"}
    assert replies[0].body["name"] == "piped-0"
    # a drain with no reply waiting is answered at once: the credit is used up
    receiver.link.drain(4)
    conn.wait(lambda: receiver.link.credit == 0, timeout=5)
    sender.send(Message(id="after", subject="GET", address="/queues/piped-0", reply_to="$me"))
    after = receiver.receive(timeout=10)
    assert (after.correlation_id, after.subject, after.body["durable"]) == ("after", "200", False)
    conn.close()


def test_a_management_link_needs_its_pair_and_the_paired_property(broker):
    conn = BlockingConnection(broker.url, timeout=10)
    with pytest.raises(LinkDetached, match="amqp:precondition-failed"):
        conn.create_sender("/management", name="unpaired", options=Paired(paired=False))
    half = conn.create_sender("/management", name="half", options=Paired())
    half.send(Message(id="1", subject="GET", address="/queues/x", reply_to="$me"))
    with pytest.raises(LinkDetached, match="half open management link pair"):
        half.send(Message(id="2", subject="GET", address="/queues/x", reply_to="$me"))
        conn.wait(lambda: False, timeout=2)
    conn.close()
