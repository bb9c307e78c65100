"""Address format v1 next to v2, and rcv-settle-mode second, answered as
RabbitMQ 4 does (its AMQP 1.0 guide, "Address v1"; rabbit_amqp_session's
attach checks), driven by python-qpid-proton; a TRANSFER that breaks the
settle mode is written with the raw client."""

from __future__ import annotations

import pytest
from proton import Delivery, Link, Message, Terminus
from proton.reactor import LinkOption
from proton.utils import BlockingConnection, LinkDetached, SendException

pytestmark = pytest.mark.timeout(60)

V1_NOT_PERMITTED = "amqp_address_v1_not_permitted"


def connect(broker, user: str = "guest", password: str = "guest") -> BlockingConnection:
    return BlockingConnection(f"amqp://{user}:{password}@127.0.0.1:{broker.port}", timeout=10)


def bodies(conn: BlockingConnection, address: str, n: int) -> list:
    r = conn.create_receiver(address, credit=n)
    got = []
    for _ in range(n):
        got.append(r.receive(timeout=10).body)
        r.accept()
    r.close()
    return got


class DurableTerminus(LinkOption):
    """Asks for a durable terminus (the source of a receiver, the target of a sender)."""

    def apply(self, link):
        terminus = link.source if link.is_receiver else link.target
        terminus.durability = Terminus.CONFIGURATION


class SettleModes(LinkOption):
    def __init__(self, snd: int, rcv: int):
        self.snd, self.rcv = snd, rcv

    def apply(self, link):
        link.snd_settle_mode = self.snd
        link.rcv_settle_mode = self.rcv


# ---------------------------------------------------------------- targets


def test_queue_target_declares_a_transient_classic_queue(broker):
    conn = connect(broker)
    conn.create_sender("/queue/v1-made").send(Message(body="one"))
    queue = broker.queue("v1-made")
    assert (queue.durable, queue.auto_delete, queue.exclusive_owner, queue.arguments) == (False, False, None, {})
    assert queue.message_count == 1
    # the bare name is the same address; the queue that exists now is used as it is
    conn.create_sender("v1-made").send(Message(body="two"))
    assert bodies(conn, "/queues/v1-made", 2) == ["one", "two"]
    conn.close()


def test_queue_target_with_a_durable_terminus_declares_a_durable_queue(broker):
    conn = connect(broker)
    conn.create_sender("/queue/v1-durable", options=DurableTerminus()).send(Message(body="kept"))
    assert broker.queue("v1-durable").durable is True
    conn.close()


def test_queue_target_uses_an_existing_queue_whatever_its_properties(broker):
    broker.declare_queue("qq-like", durable=True, **{"x-max-length": 5})
    conn = connect(broker)
    conn.create_sender("/queue/qq-like").send(Message(body="fits"))
    assert broker.queue("qq-like").message_count == 1
    conn.close()


def test_amq_queue_target_needs_the_queue(broker):
    conn = connect(broker)
    with pytest.raises(LinkDetached, match="amqp:not-found"):
        conn.create_sender("/amq/queue/absent")
    assert "absent" not in broker.vhost.queues
    broker.declare_queue("present")
    conn.create_sender("/amq/queue/present").send(Message(body="in"))
    assert broker.queue("present").message_count == 1
    conn.close()


def test_exchange_targets_take_a_fixed_key_or_the_subject(broker):
    async def bind():
        await broker.vhost.bind("amq.direct", "queue", "by-key", "k1")
        await broker.vhost.bind("amq.topic", "queue", "by-key", "t.*")

    broker.declare_queue("by-key")
    broker.call(bind)
    conn = connect(broker)
    conn.create_sender("/exchange/amq.direct/k1").send(Message(body="fixed"))
    by_subject = conn.create_sender("/exchange/amq.direct")
    by_subject.send(Message(body="subject", subject="k1"))
    with pytest.raises(SendException) as e:
        by_subject.send(Message(body="nowhere", subject="k2"))
    assert e.value.state == Delivery.RELEASED
    conn.create_sender("/topic/t.x").send(Message(body="topic"))
    assert bodies(conn, "/queues/by-key", 3) == ["fixed", "subject", "topic"]
    with pytest.raises(LinkDetached, match="amqp:not-found"):
        conn.create_sender("/exchange/absent/k")
    conn.close()


def test_queue_target_without_name_routes_by_subject(broker):
    broker.declare_queue("named-by-subject")
    conn = connect(broker)
    sender = conn.create_sender("/queue")
    sender.send(Message(body="found", subject="named-by-subject"))
    with pytest.raises(SendException) as e:
        sender.send(Message(body="lost", subject="no-such-queue"))
    assert e.value.state == Delivery.RELEASED
    assert "no-such-queue" not in broker.vhost.queues  # /queue declares nothing
    assert bodies(conn, "/queues/named-by-subject", 1) == ["found"]
    conn.close()


def test_bad_v1_address_is_invalid_field(broker):
    conn = connect(broker)
    for addr in ("/queue/", "/exchange//k", "/topic/a/b", "/wrong/address"):
        with pytest.raises(LinkDetached, match="amqp:invalid-field") as e:
            conn.create_sender(addr)
        assert V1_NOT_PERMITTED not in str(e.value)
    conn.close()


# ---------------------------------------------------------------- sources


def test_queue_source_declares_the_queue_and_consumes(broker):
    conn = connect(broker)
    receiver = conn.create_receiver("/queue/v1-consumed", credit=1)  # credit sent before our ATTACH answers
    assert broker.queue("v1-consumed").consumer_count == 1
    conn.create_sender("/queues/v1-consumed").send(Message(body="hello"))
    assert receiver.receive(timeout=10).body == "hello"
    receiver.accept()
    conn.close()


def test_exchange_and_topic_sources_consume_from_a_new_bound_queue(broker):
    conn = connect(broker)
    fanout = conn.create_receiver("/exchange/amq.fanout", credit=5)
    topic = conn.create_receiver("/topic/news.*", credit=5)
    made = {n: q for n, q in broker.vhost.queues.items() if n.startswith("amq.gen-")}
    assert len(made) == 2
    bindings = {(b.source, b.binding_key) for b in broker.vhost.routing.list_bindings() if b.destination in made}
    assert bindings == {("amq.fanout", ""), ("amq.topic", "news.*")}
    conn.create_sender("/exchanges/amq.fanout").send(Message(body="to all"))
    conn.create_sender("/exchanges/amq.topic/news.today").send(Message(body="news"))
    with pytest.raises(SendException):  # nobody bound for sports: released
        conn.create_sender("/exchanges/amq.topic/sports.today").send(Message(body="sports"))
    assert fanout.receive(timeout=10).body == "to all"
    assert topic.receive(timeout=10).body == "news"
    with pytest.raises(LinkDetached, match="amqp:not-found"):
        conn.create_receiver("/exchange/absent/k")
    assert len([n for n in broker.vhost.queues if n.startswith("amq.gen-")]) == 2  # none made for it
    conn.close()


def test_amq_queue_source_needs_the_queue(broker):
    conn = connect(broker)
    with pytest.raises(LinkDetached, match="amqp:not-found"):
        conn.create_receiver("/amq/queue/absent")
    assert "absent" not in broker.vhost.queues
    conn.close()


# ---------------------------------------------------------------- permissions


def test_v1_declaration_needs_configure_permission(broker):
    broker.add_user("bob", "pw")
    broker.set_permissions("bob", "/", configure="^nothing$", write=".*", read=".*")
    conn = connect(broker, "bob", "pw")
    with pytest.raises(LinkDetached, match="amqp:unauthorized-access"):
        conn.create_sender("/queue/bobs")
    with pytest.raises(LinkDetached, match="amqp:unauthorized-access"):
        conn.create_receiver("/topic/a.b")
    assert not [n for n in broker.vhost.queues if n == "bobs" or n.startswith("amq.gen-")]
    broker.set_permissions("bob", "/", configure="^bobs$", write="^$", read=".*")
    with pytest.raises(LinkDetached, match="amqp:unauthorized-access"):  # write on amq.default
        conn.create_sender("/queue/bobs")
    assert "bobs" in broker.vhost.queues  # declared, as RabbitMQ, before the write check
    conn.close()


# ---------------------------------------------------------------- refusing v1


def test_v1_refused_when_not_permitted(broker_factory):
    broker = broker_factory(permit_amqp_address_v1=False)
    broker.declare_queue("exists")
    conn = connect(broker)
    for addr in ("/queue/new", "new", "/amq/queue/exists", "/exchange/amq.direct/k", "/topic/t", "/queue"):
        with pytest.raises(LinkDetached, match="amqp:invalid-field") as e:
            conn.create_sender(addr)
        assert V1_NOT_PERMITTED in str(e.value)
    for addr in ("/queue/new", "/amq/queue/exists", "/exchange/amq.fanout", "/topic/t"):
        with pytest.raises(LinkDetached, match=V1_NOT_PERMITTED):
            conn.create_receiver(addr)
    assert set(broker.vhost.queues) == {"exists"}
    conn.create_sender("/queues/exists").send(Message(body="v2 still works"))
    assert bodies(conn, "/queues/exists", 1) == ["v2 still works"]
    conn.close()


# ---------------------------------------------------------------- rcv-settle-mode second


def test_rcv_settle_mode_second_is_refused_with_not_implemented(broker):
    broker.declare_queue("modes")
    conn = connect(broker)
    with pytest.raises(LinkDetached, match="amqp:not-implemented"):
        conn.create_sender("/queues/modes", name="s1", options=SettleModes(Link.SND_UNSETTLED, Link.RCV_SECOND))
    with pytest.raises(LinkDetached, match="amqp:not-implemented"):
        conn.create_receiver("/queues/modes", name="r1", options=SettleModes(Link.SND_UNSETTLED, Link.RCV_SECOND))
    # where the sender settles everything itself, mode second means nothing: accepted
    receiver = conn.create_receiver("/queues/modes", name="r2", credit=1,
                                    options=SettleModes(Link.SND_SETTLED, Link.RCV_SECOND))
    assert receiver.link.remote_rcv_settle_mode == Link.RCV_SECOND
    conn.create_sender("/queues/modes", name="s2").send(Message(body="pre-settled"))
    assert receiver.receive(timeout=10).body == "pre-settled"
    # a publisher is told rcv-settle-mode first, whatever it asked
    publisher = conn.create_sender("/queues/modes", name="s3", options=SettleModes(Link.SND_SETTLED, Link.RCV_SECOND))
    assert publisher.link.remote_rcv_settle_mode == Link.RCV_FIRST
    conn.close()


def test_transfer_asking_rcv_settle_mode_second_detaches_the_link(broker):
    from raw_client import RawClient

    from amqp import definitions as d
    from amqp import events as ev

    broker.declare_queue("modes")
    client = RawClient(broker.port)
    client.connect()
    session = client.begin()
    link = client.sender(session, "/queues/modes")
    client.send_frame(session.channel, d.Transfer(handle=link.handle, delivery_id=0, delivery_tag=b"t0",
                                                  message_format=0, settled=False, rcv_settle_mode=d.RCV_SECOND),
                      b"\x00\x53\x77\x40")  # fmt: skip
    detached = client.wait_event(ev.LinkDetached, link=link)
    assert detached.error.condition == "amqp:not-implemented"
    assert broker.queue("modes").message_count == 0
    client.close()


def test_the_setting_is_read_from_the_environment_and_the_config_file(tmp_path):
    from node import config

    assert config.load(env={}).permit_amqp_address_v1 is True  # RabbitMQ 4.0-4.2's default
    assert config.load(env={"WARREN_PERMIT_AMQP_ADDRESS_V1": "false"}).permit_amqp_address_v1 is False
    toml = tmp_path / "warren.toml"
    toml.write_text("permit-amqp-address-v1 = false\n")
    assert config.load(str(toml), env={}).permit_amqp_address_v1 is False
