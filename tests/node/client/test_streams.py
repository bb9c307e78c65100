"""Streams on one node, driven by python-qpid-proton: declare, publish, read
from each kind of offset spec, filter values, the reply ATTACH's filters,
settlement that changes nothing, restart and delete."""

from __future__ import annotations

import json
import os
import time

import pytest
from confirming_publisher import ConfirmingPublisher
from proton import Described, Message, Timeout, symbol, timestamp, ulong
from proton.reactor import Container, Filter
from proton.utils import BlockingConnection, LinkDetached

from queues.stream import wire

OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
STREAM_FILTER = symbol("rabbitmq:stream-filter")
MATCH_UNFILTERED = symbol("rabbitmq:stream-match-unfiltered")


def connect(broker) -> BlockingConnection:
    return BlockingConnection(broker.url, timeout=10)


def declare_stream(broker, name: str, **arguments):
    return broker.declare_queue(name, **{"x-queue-type": "stream", **arguments})


def source_filter(**entries) -> Filter:
    keys = {"offset": OFFSET_SPEC, "values": STREAM_FILTER, "unfiltered": MATCH_UNFILTERED}
    return Filter({keys[k]: Described(keys[k], v) for k, v in entries.items()})


def publish(conn, stream: str, bodies, filter_values=None) -> None:
    sender = conn.create_sender(f"/queues/{stream}")
    for i, body in enumerate(bodies):
        annotations = None
        if filter_values is not None and filter_values[i] is not None:
            annotations = {symbol("x-stream-filter-value"): filter_values[i]}
        sender.send(Message(body=body, durable=True, annotations=annotations))  # waits for the confirm
    sender.close()


def receive(conn, stream: str, n: int, **spec) -> tuple[list, list]:
    receiver = conn.create_receiver(f"/queues/{stream}", credit=max(n, 1),
                                    options=source_filter(**spec) if spec else None)  # fmt: skip
    got = [receiver.receive(timeout=10) for _ in range(n)]
    receiver.accept()
    receiver.close()
    return [m.body for m in got], [m.annotations["x-stream-offset"] for m in got]


def nothing_more(conn, stream: str, **spec) -> bool:
    receiver = conn.create_receiver(f"/queues/{stream}", credit=10, options=source_filter(**spec))
    try:
        receiver.receive(timeout=0.3)
    except Timeout:  # nothing came
        return True
    finally:
        receiver.close()
    return False


def echoed_filters(receiver) -> dict:
    data = receiver.link.remote_source.filter
    data.rewind()
    return data.get_object() if data.next() is not None else {}


def test_publish_then_read_from_first_again_and_again(broker):
    declare_stream(broker, "s")
    conn = connect(broker)
    publish(conn, "s", [f"m{i}" for i in range(10)])
    for _ in range(2):  # reading takes nothing away, accepted or not
        bodies, offsets = receive(conn, "s", 10, offset="first")
        assert bodies == [f"m{i}" for i in range(10)] and offsets == list(range(10))
    assert broker.queue("s").message_count == 10
    conn.close()


def test_offset_specs(broker):
    declare_stream(broker, "s")
    conn = connect(broker)
    before = int(time.time() * 1000)
    publish(conn, "s", ["a", "b", "c"])  # one confirm at a time: a chunk each
    assert receive(conn, "s", 2, offset=ulong(1))[0] == ["b", "c"]
    assert receive(conn, "s", 1, offset="last")[0] == ["c"]
    assert receive(conn, "s", 3, offset=timestamp(before))[0] == ["a", "b", "c"]
    assert nothing_more(conn, "s", offset=timestamp(int(time.time() * 1000) + 60_000))
    assert nothing_more(conn, "s", offset=ulong(99))  # past the end: waits there
    # next (the default): only what is published after the attach
    receiver = conn.create_receiver("/queues/s", credit=5)
    publish(conn, "s", ["d"])
    message = receiver.receive(timeout=10)
    assert message.body == "d" and message.annotations["x-stream-offset"] == 3
    receiver.close()
    with pytest.raises(LinkDetached, match="invalid-field"):
        conn.create_receiver("/queues/s", options=source_filter(offset="middle"))
    conn.close()


def test_filter_values_with_and_without_unfiltered_messages(broker):
    declare_stream(broker, "s")
    conn = connect(broker)
    values = ["apple", "banana", None, "apple", "cherry", None]
    publish(conn, "s", [f"m{i}" for i in range(6)], values)
    assert receive(conn, "s", 2, offset="first", values="apple")[0] == ["m0", "m3"]
    assert receive(conn, "s", 2, offset="first", values=["banana", "cherry"])[0] == ["m1", "m4"]
    bodies, offsets = receive(conn, "s", 4, offset="first", values=["apple"], unfiltered=True)
    assert bodies == ["m0", "m2", "m3", "m5"] and offsets == [0, 2, 3, 5]
    assert nothing_more(conn, "s", offset=ulong(4), values="apple")
    conn.close()


def test_the_reply_attach_echoes_only_the_filters_applied(broker):
    declare_stream(broker, "s")
    declare = broker.declare_queue("classic")
    assert declare is not None
    conn = connect(broker)
    other = symbol("apache.org:selector-filter:string")  # JMS selectors are not served: not applied, not echoed
    options = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first"), STREAM_FILTER: Described(STREAM_FILTER, "x"),
                      other: Described(other, "k = 'v'")})  # fmt: skip
    receiver = conn.create_receiver("/queues/s", options=options)
    assert set(echoed_filters(receiver)) == {OFFSET_SPEC, STREAM_FILTER}
    receiver.close()
    receiver = conn.create_receiver("/queues/classic", options=options)
    assert not echoed_filters(receiver)  # a classic queue applies none
    conn.close()


def test_a_stream_survives_a_restart_and_goes_on_at_the_next_offset(broker_factory, tmp_path):
    node = broker_factory(tmp_path / "d")
    declare_stream(node, "s", **{"x-stream-max-segment-size-bytes": 400})
    conn = connect(node)
    publish(conn, "s", [f"m{i}" for i in range(8)])
    conn.close()
    segments = len(node.queue("s").log.segments)
    node.stop()
    node = broker_factory(tmp_path / "d")
    assert node.queue("s").message_count == 8 and len(node.queue("s").log.segments) == segments > 1
    conn = connect(node)
    publish(conn, "s", ["after"])
    bodies, offsets = receive(conn, "s", 9, offset="first")
    assert bodies == [f"m{i}" for i in range(8)] + ["after"] and offsets == list(range(9))
    conn.close()


def test_retention_by_size_moves_readers_past_the_removed_head(broker):
    declare_stream(broker, "s", **{"x-stream-max-segment-size-bytes": 300, "x-max-length-bytes": 600})
    conn = connect(broker)
    publish(conn, "s", [f"{i:03d}" + "x" * 100 for i in range(20)])
    stream = broker.queue("s")
    first = stream.log.first_offset
    assert first > 0 and stream.log.bytes <= 600 + 300
    bodies, offsets = receive(conn, "s", 20 - first, offset=ulong(0))  # before the head: from the head
    assert offsets == list(range(first, 20))
    conn.close()


def test_deleting_a_stream_ends_its_consumers_and_its_files(broker):
    stream = declare_stream(broker, "s")
    conn = connect(broker)
    publish(conn, "s", ["m"])
    receiver = conn.create_receiver("/queues/s", credit=5, options=source_filter(offset="next"))
    directory = stream.log.directory
    broker.call(broker.vhost.delete_queue, "s")
    with pytest.raises(LinkDetached, match="resource-deleted"):
        receiver.receive(timeout=10)
    assert not os.path.exists(directory)
    conn.close()


def test_properties_and_application_properties_filter_expressions(broker):
    declare_stream(broker, "s")
    conn = connect(broker)
    sender = conn.create_sender("/queues/s")
    for i, (subject, region) in enumerate([("order.created", "eu"), ("order.paid", "us"), ("invoice", "eu"),
                                           ("order.created", "us"), (None, "eu")]):  # fmt: skip
        sender.send(Message(body=f"m{i}", subject=subject, properties={"region": region, "n": i}))
    sender.close()
    props, app = symbol("amqp:properties-filter"), symbol("amqp:application-properties-filter")

    def read(n: int, filters: dict) -> list:
        options = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first"),
                          **{k: Described(k, v) for k, v in filters.items()}})  # fmt: skip
        receiver = conn.create_receiver("/queues/s", credit=10, options=options)
        assert set(echoed_filters(receiver)) == {OFFSET_SPEC, *filters}
        got = [receiver.receive(timeout=10).body for _ in range(n)]
        with pytest.raises(Timeout):  # no more matching messages
            receiver.receive(timeout=0.3)
        receiver.close()
        return got

    assert read(2, {props: {symbol("subject"): "order.created"}}) == ["m0", "m3"]
    assert read(3, {props: {symbol("subject"): "&p:order."}}) == ["m0", "m1", "m3"]
    assert read(1, {props: {symbol("subject"): "&s:paid"}, app: {"region": "us"}}) == ["m1"]
    assert read(3, {app: {"region": "eu"}}) == ["m0", "m2", "m4"]
    assert read(1, {app: {"n": 2}}) == ["m2"]
    with pytest.raises(LinkDetached, match="invalid-field"):
        conn.create_receiver("/queues/s", options=Filter({props: Described(props, {symbol("colour"): "red"})}))
    conn.close()


def test_an_exchange_routes_to_streams_and_deliveries_keep_exchange_and_key(broker):
    for name in ("s1", "s2"):
        declare_stream(broker, name)
        broker.call(broker.vhost.bind, "amq.fanout", "queue", name)
    conn = connect(broker)
    sender = conn.create_sender("/exchanges/amq.fanout/any-key")
    sender.send(Message(body="fan", durable=True))
    sender.close()
    for name in ("s1", "s2"):
        receiver = conn.create_receiver(f"/queues/{name}", credit=1, options=source_filter(offset="first"))
        message = receiver.receive(timeout=10)
        assert message.body == "fan" and message.annotations["x-exchange"] == "amq.fanout"
        assert message.annotations["x-routing-key"] == "any-key" and message.annotations["x-stream-offset"] == 0
        receiver.close()
    conn.close()


def test_kill_9_loses_no_confirmed_message_and_keeps_offsets_dense(tmp_path, broker_process_factory):
    data, defs = tmp_path / "data", tmp_path / "defs.json"
    defs.write_text(json.dumps({"queues": [{"name": "s", "durable": True, "arguments": {
        "x-queue-type": "stream", "x-stream-max-segment-size-bytes": 100_000}}]}))  # fmt: skip
    broker = broker_process_factory(data, definitions=defs)
    pub = ConfirmingPublisher(broker.url, "/queues/s", total=20000, kill_after=3000, broker=broker)
    Container(pub).run()
    assert pub.killed and len(pub.confirmed) >= 3000
    restarted = broker_process_factory(data)
    conn = BlockingConnection(restarted.url, timeout=10)
    receiver = conn.create_receiver("/queues/s", credit=1000, options=source_filter(offset="first"))
    ids, offsets = [], []
    while True:
        try:
            m = receiver.receive(timeout=2)
        except Timeout:
            break
        ids.append(int(m.id))
        offsets.append(m.annotations["x-stream-offset"])
        receiver.accept()
    conn.close()
    missing = pub.confirmed - set(ids)
    assert not missing, f"{len(missing)} confirmed messages lost, e.g. {sorted(missing)[:5]}"
    assert offsets == list(range(len(ids))) and len(ids) == len(set(ids)) and set(ids) <= set(range(pub.sent))


def test_a_replicas_fetch_before_any_stream_started_here_is_dropped_quietly(broker, caplog):
    """The node takes the stream replication channel at start: a replica's first fetch may reach
    the leader's node before the stream has started there (the leader announces itself then)."""
    fetch = wire.encode(wire.Fetch("/", "not-yet", 1, 0, -1, 0, 0, 0))
    with caplog.at_level("WARNING"):
        broker.call(lambda: broker.broker.cluster.rpc._on_message("peer:1", "stream.repl", fetch))
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
