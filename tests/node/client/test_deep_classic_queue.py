"""A classic queue deeper than its memory window on a real node: the backlog
lives in the message store, a kill -9 mid-publish loses no confirmed message,
and the restarted node rebuilds the queue without reading a body, then
delivers every confirmed message in order while holding at most its window."""

from __future__ import annotations

import json

from confirming_publisher import ConfirmingPublisher
from proton import Message
from proton.reactor import Container
from proton.utils import BlockingConnection

from storage.message_store import MessageStore

WINDOW = 20


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
