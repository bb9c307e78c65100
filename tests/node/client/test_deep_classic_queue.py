"""A classic queue deeper than its memory window on a real node: the backlog
lives in the message store, a kill -9 mid-publish loses no confirmed message,
and the restarted node rebuilds the queue without reading a body, then
delivers every confirmed message in order while holding at most its window."""

from __future__ import annotations

import json
from contextlib import suppress

from confirming_publisher import ConfirmingPublisher
from proton import ConnectionException, Message, Timeout
from proton.reactor import Container
from proton.utils import BlockingConnection
from rocksdict import AccessType, Rdict

from storage.message_store import MessageStore

WINDOW = 20
CHECKPOINT_EVERY = 200


def test_deep_queue_survives_kill_9_and_restarts_without_reading_bodies(tmp_path, broker_process_factory,
                                                                        broker_factory):  # fmt: skip
    data = tmp_path / "data"
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps({"queues": [{"name": "deep", "durable": True}]}))
    env = {"WARREN_CLASSIC_QUEUE_MEMORY_WINDOW": str(WINDOW)}
    proc = broker_process_factory(data, definitions=defs, extra_env=env)
    pub = ConfirmingPublisher(proc.url, "/queues/deep", total=6000, kill_after=3000, broker=proc)
    Container(pub).run()
    assert pub.killed and len(pub.confirmed) >= 3000

    node = broker_factory(data, classic_queue_memory_window=WINDOW)
    store = node.broker.store
    q = node.queue("deep")
    depth = node.call(lambda: q.message_count)
    assert depth >= len(pub.confirmed)
    info = node.call(q.info)
    assert info["messages_ram"] == 0 and info["messages_paged_out"] == depth
    assert store.body_reads == 0  # the restart read the index only

    conn = BlockingConnection(node.url, timeout=10)
    receiver = conn.create_receiver("/queues/deep", credit=50)
    ids = []
    most_held = 0
    for _ in range(depth):
        ids.append(int(receiver.receive(timeout=10).id))
        receiver.accept()
        if len(ids) % 50 == 0:
            most_held = max(most_held, node.call(lambda: len(q._messages.ready) + len(q._messages.returned)))
    conn.close()

    assert ids == sorted(ids) and len(set(ids)) == len(ids), "delivered out of order or twice"
    missing = pub.confirmed - set(ids)
    assert not missing, f"{len(missing)} confirmed messages lost, e.g. {sorted(missing)[:5]}"
    assert most_held <= WINDOW
    assert store.body_reads == depth  # each body read once, when delivered


def test_kill_9_with_a_consumer_part_way_recovers_from_the_checkpoint(tmp_path, broker_process_factory,
                                                                     broker_factory):  # fmt: skip
    """Checkpoints every 200 publishes or tail reads: a backlog, a consumer
    that took 1,500 of it (the last 50 unaccepted when the node dies), a few
    more publishes, kill -9. The restart reads the newest checkpoint and a bounded
    part of the index; every confirmed message not accepted comes back, in
    order, once."""
    data = tmp_path / "data"
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps({"queues": [{"name": "deep", "durable": True}]}))
    env = {"WARREN_CLASSIC_QUEUE_MEMORY_WINDOW": str(WINDOW),
           "WARREN_CLASSIC_QUEUE_CHECKPOINT_EVERY": str(CHECKPOINT_EVERY)}  # fmt: skip
    proc = broker_process_factory(data, definitions=defs, extra_env=env)
    first = ConfirmingPublisher(proc.url, "/queues/deep", total=3000, kill_after=None, broker=proc)
    Container(first).run()
    assert len(first.confirmed) == 3000

    consumer = BlockingConnection(proc.url, timeout=10)
    receiver = consumer.create_receiver("/queues/deep", credit=50)
    accepted = []
    for i in range(1500):
        delivery_id = int(receiver.receive(timeout=10).id)
        if i < 1450:  # the last 50 are left unsettled: unacked when the node dies
            receiver.accept()
            accepted.append(delivery_id)
    assert accepted == list(range(1450))

    # fewer publishes than CHECKPOINT_EVERY: the newest checkpoint is one the consumer's reads wrote, so
    # the restart must find out from the index which of the messages read after it are gone
    second = ConfirmingPublisher(proc.url, "/queues/deep", total=150, kill_after=120, broker=proc, first=3000)
    Container(second).run()
    assert second.killed
    with suppress(Timeout, ConnectionException):
        consumer.close()  # its node is gone

    positions = Rdict(str(data / "messages"), access_type=AccessType.read_only())
    assert any(key[:1] == b"p" for key in positions.keys(from_key=b"p")), "no checkpoint reached the disk"
    positions.close()

    node = broker_factory(data, classic_queue_memory_window=WINDOW, classic_queue_checkpoint_every=CHECKPOINT_EVERY)
    assert node.broker.store.body_reads == 0
    q = node.queue("deep")
    depth = node.call(lambda: q.message_count)
    conn = BlockingConnection(node.url, timeout=10)
    receiver = conn.create_receiver("/queues/deep", credit=50)
    ids = []
    for _ in range(depth):
        ids.append(int(receiver.receive(timeout=10).id))
        receiver.accept()
    conn.close()

    assert ids == sorted(ids) and len(set(ids)) == len(ids), "delivered out of order or twice"
    must_come_back = (first.confirmed | second.confirmed) - set(accepted)
    missing = must_come_back - set(ids)
    assert not missing, f"{len(missing)} confirmed messages lost, e.g. {sorted(missing)[:5]}"
    assert set(ids) - must_come_back <= set(accepted) | set(range(3000 + second.sent))


def test_live_backlog_holds_only_its_window_in_memory(tmp_path, broker_factory):
    node = broker_factory(tmp_path / "data", classic_queue_memory_window=WINDOW)
    node.declare_queue("durable-q", durable=True)
    node.declare_queue("transient-q", durable=False)
    conn = BlockingConnection(node.url, timeout=10)
    for address, durable in (("/queues/durable-q", True), ("/queues/transient-q", False)):
        sender = conn.create_sender(address)
        for i in range(500):
            sender.send(Message(id=i, body="x" * 100, durable=durable))
        sender.close()
    node.call(node.broker.committer.flush)  # paged bodies are kept until their write is durable
    for name in ("durable-q", "transient-q"):
        q = node.queue(name)
        info = node.call(q.info)
        assert (info["messages_ram"], info["messages_paged_out"]) == (WINDOW, 500 - WINDOW), name
        assert node.call(lambda q=q: q.memory_bytes) <= WINDOW * 200, name
    transient_key = node.queue("transient-q").store_key
    for name in ("durable-q", "transient-q"):
        receiver = conn.create_receiver(f"/queues/{name}", credit=100)
        got = []
        for _ in range(250):
            got.append(int(receiver.receive(timeout=10).id))
            receiver.accept()
        assert got == list(range(250)), name
        receiver.close()
    conn.close()
    node.stop()

    # the transient queue's page copies do not outlive the node
    # a clean restart rebuilds the queue from its positions snapshot: no body read until delivery
    node = broker_factory(tmp_path / "data", classic_queue_memory_window=WINDOW)
    assert node.call(lambda: node.queue("durable-q").message_count) == 250
    assert node.broker.store.body_reads == 0
    conn = BlockingConnection(node.url, timeout=10)
    receiver = conn.create_receiver("/queues/durable-q", credit=100)
    got = []
    for _ in range(250):
        got.append(int(receiver.receive(timeout=10).id))
        receiver.accept()
    assert got == list(range(250, 500))
    conn.close()
    node.stop()
    store = MessageStore(tmp_path / "data" / "messages")
    assert list(store.iter_index(transient_key)) == []
    store.close()
