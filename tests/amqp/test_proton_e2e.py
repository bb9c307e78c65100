"""A real AMQP 1.0 client (python-qpid-proton) against the engine, over
sockets: the mini broker of mini_server.py runs on a background thread."""

from __future__ import annotations

import time

import pytest
from mini_server import MiniServer

proton = pytest.importorskip("proton")
from proton import ConnectionException, Message  # noqa: E402
from proton.reactor import AtMostOnce  # noqa: E402
from proton.utils import BlockingConnection, LinkDetached  # noqa: E402

pytestmark = pytest.mark.timeout(60)

ACCEPTED = proton.Delivery.ACCEPTED


@pytest.fixture
def server():
    with MiniServer() as srv:
        yield srv
        assert srv.errors == []


def messages(n: int) -> list[Message]:
    return [
        Message(
            id=f"id-{i}",
            subject=f"subject {i}",
            correlation_id=i,
            content_type="text/plain",
            body=f"body {i} é" if i % 2 else {"n": i, "list": [1, 2.5, None], "bytes": b"\x00\x01"},
            properties={"index": i, "tag": f"t{i}", "flag": bool(i % 2)},
            annotations={"x-opt-test": i},
            durable=bool(i % 2),
            priority=i % 10,
        )
        for i in range(n)
    ]


def same(a: Message, b: Message) -> bool:
    return (
        a.id == b.id and a.subject == b.subject and a.correlation_id == b.correlation_id
        and a.content_type == b.content_type and a.body == b.body and a.properties == b.properties
        and a.annotations == b.annotations and a.durable == b.durable and a.priority == b.priority
    )  # fmt: skip


def test_full_conversation(server):
    conn = BlockingConnection(server.url, timeout=10)
    sender = conn.create_sender("q1")
    sent = messages(10)
    for m in sent:
        delivery = sender.send(m)
        assert delivery.remote_state == ACCEPTED
    sender.close()
    receiver = conn.create_receiver("q1", credit=5)
    got = []
    for _ in sent:
        got.append(receiver.receive(timeout=10))
        receiver.accept()
    assert all(same(a, b) for a, b in zip(sent, got, strict=True))
    receiver.close()
    conn.close()
    time.sleep(0.2)
    (handler,) = server.handlers
    log = handler.log
    for kind in ("SaslInitReceived", "ConnectionOpened", "SessionBegun", "LinkAttached", "MessageReceived",
                 "DeliveriesUpdated", "LinkDetached", "ConnectionClosed"):  # fmt: skip
        assert kind in log, (kind, log)
    assert log.count("MessageReceived") == 10 and log.count("LinkDetached") == 2
    assert handler.sasl_mechanism == "ANONYMOUS" and handler.conn.closed
    assert not server.store.queues["q1"] and handler.outstanding == {}


def test_producer_and_consumer_on_separate_connections(server):
    consumer = BlockingConnection(server.url, timeout=10)
    receiver = consumer.create_receiver("shared", credit=3)
    producer = BlockingConnection(server.url, timeout=10)
    sender = producer.create_sender("shared")
    sent = messages(7)
    for m in sent:
        assert sender.send(m).remote_state == ACCEPTED
    got = []
    for _ in sent:
        got.append(receiver.receive(timeout=10))
        receiver.accept()
    assert [m.id for m in got] == [m.id for m in sent]
    producer.close()
    consumer.close()


def test_sasl_plain(server):
    conn = BlockingConnection(server.url, timeout=10, user="guest", password="guest", allowed_mechs="PLAIN",
                              allow_insecure_mechs=True)  # fmt: skip
    assert conn.create_sender("p").send(Message(body="x")).remote_state == ACCEPTED
    conn.close()
    assert server.handlers[0].sasl_mechanism == "PLAIN" and server.handlers[0].user == "guest"


def test_sasl_plain_wrong_password(server):
    with pytest.raises(ConnectionException):
        conn = BlockingConnection(server.url, timeout=5, user="guest", password="nope", allowed_mechs="PLAIN",
                                  allow_insecure_mechs=True)  # fmt: skip
        conn.create_sender("p")


@pytest.mark.parametrize("max_frame_size", [512, 4096])
def test_multi_frame_transfers_both_ways(max_frame_size):
    """Both sides allow only small frames: a message crosses in many TRANSFER
    frames each way and is reassembled intact."""
    with MiniServer(max_frame_size=max_frame_size) as server:
        conn = BlockingConnection(server.url, timeout=20, max_frame_size=max_frame_size)
        body = bytes(range(256)) * 200  # 51 KB
        sender = conn.create_sender("big")
        m = Message(body=body, properties={"size": len(body)})
        assert sender.send(m).remote_state == ACCEPTED
        receiver = conn.create_receiver("big")
        got = receiver.receive(timeout=20)
        receiver.accept()
        assert got.body == body and got.properties == {"size": len(body)}
        handler = server.handlers[0]
        assert handler.conn.remote_max_frame_size == max_frame_size
        assert handler.conn.remote_open.max_frame_size == max_frame_size
        conn.close()
        assert server.errors == []


def test_one_megabyte_message(server):
    conn = BlockingConnection(server.url, timeout=30)
    body = bytes(i * 7 % 251 for i in range(1 << 20))
    assert conn.create_sender("mb").send(Message(body=body)).remote_state == ACCEPTED
    receiver = conn.create_receiver("mb")
    got = receiver.receive(timeout=30)
    receiver.accept()
    assert got.body == body
    conn.close()


def test_one_megabyte_message_in_512_byte_frames():
    with MiniServer(max_frame_size=512) as server:
        conn = BlockingConnection(server.url, timeout=60, max_frame_size=512)
        body = bytes(i * 13 % 253 for i in range(1 << 20))
        assert conn.create_sender("mb").send(Message(body=body)).remote_state == ACCEPTED
        receiver = conn.create_receiver("mb")
        got = receiver.receive(timeout=60)
        receiver.accept()
        assert got.body == body
        conn.close()
        assert server.errors == []


def test_presettled_both_ways(server):
    conn = BlockingConnection(server.url, timeout=10)
    sender = conn.create_sender("ps", options=AtMostOnce())
    for m in messages(3):
        sender.send(m)
    receiver = conn.create_receiver("ps", options=AtMostOnce())
    got = [receiver.receive(timeout=10) for _ in range(3)]
    assert [m.id for m in got] == ["id-0", "id-1", "id-2"]
    time.sleep(0.1)
    assert server.handlers[0].outstanding == {}
    conn.close()


def test_released_message_is_redelivered(server):
    conn = BlockingConnection(server.url, timeout=10)
    conn.create_sender("rel").send(Message(body="again"))
    receiver = conn.create_receiver("rel", credit=1)
    assert receiver.receive(timeout=10).body == "again"
    receiver.release()
    assert receiver.receive(timeout=10).body == "again"
    receiver.accept()
    conn.close()


def test_unsettled_messages_return_when_the_consumer_goes_away(server):
    producer = BlockingConnection(server.url, timeout=10)
    sender = producer.create_sender("requeue")
    for m in messages(3):
        sender.send(m)
    consumer = BlockingConnection(server.url, timeout=10)
    receiver = consumer.create_receiver("requeue", credit=3)
    assert receiver.receive(timeout=10).id == "id-0"  # received, never settled
    consumer.close()
    consumer = BlockingConnection(server.url, timeout=10)
    receiver = consumer.create_receiver("requeue", credit=3)
    ids = sorted(receiver.receive(timeout=10).id for _ in range(3))
    assert ids == ["id-0", "id-1", "id-2"]
    receiver.accept()
    consumer.close()
    producer.close()


def test_refused_link_surfaces_at_the_client(server):
    conn = BlockingConnection(server.url, timeout=10)
    with pytest.raises(LinkDetached) as info:
        conn.create_receiver(None, dynamic=True)
    assert "amqp:not-found" in str(info.value)
    # the connection survives a refused link
    assert conn.create_sender("ok").send(Message(body=1)).remote_state == ACCEPTED
    conn.close()


def test_heartbeats_keep_an_idle_connection_open(server):
    conn = BlockingConnection(server.url, timeout=10, heartbeat=1)
    sender = conn.create_sender("hb")
    idle = conn.create_receiver("nothing-here")
    # proton closes after 1 s without a frame from us unless we heartbeat; a
    # blocking receive keeps its I/O loop running (time.sleep would not)
    with pytest.raises(proton.Timeout):
        idle.receive(timeout=2.5)
    assert sender.send(Message(body="still here")).remote_state == ACCEPTED
    assert server.handlers[0].conn.remote_idle_timeout == pytest.approx(1.0, abs=0.6)
    conn.close()
