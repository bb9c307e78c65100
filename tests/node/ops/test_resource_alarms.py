"""The memory and disk alarms on a real node, with real AMQP clients.

Memory: the alarm counts what the node holds (node/ops/memory.py), so it
rises with a backlog held in memory and clears once the backlog is drained,
and the publisher that was held goes on, on the same connection and link.
Disk: a real full filesystem (a small tmpfs): publishers are held, the
publishes whose write met the full disk are confirmed once space is freed
(not refused: their messages are in the queue), and each message is kept once."""

from __future__ import annotations

import os

from mgmt_client import Api, sample, scrape
from proton import Message
from proton.utils import BlockingConnection
from tmpfs import fill, mount_tmpfs  # tests/support/

from node.ops import memory

MiB = 1024 * 1024
BODY = b"m" * (20 * 1024)


def _publish(sender, n: int, start: int = 0) -> list:
    return [sender.send(Message(id=start + i, body=BODY, durable=True), error_states=[]) for i in range(n)]


def _drain(url: str, address: str, n: int) -> list:
    conn = BlockingConnection(url, timeout=20)
    try:
        receiver = conn.create_receiver(address, credit=100)
        ids = []
        for _ in range(n):
            ids.append(receiver.receive(timeout=20).id)
            receiver.accept()
        return ids
    finally:
        conn.close()


def test_memory_alarm_rises_with_a_backlog_and_clears_after_the_drain_without_reconnecting(broker_factory, monkeypatch):
    monkeypatch.setattr(memory, "TRIM_AFTER", 2 * MiB)  # the drain of 6 MB is a large release
    # the whole backlog stays in memory (no paging window), checked every 50 ms
    node = broker_factory(classic_queue_memory_window=-1, classic_queue_memory_bytes=-1, alarm_check_interval=0.05)
    broker = node.broker
    node.declare_queue("backlog")
    baseline = node.call(lambda: (broker.alarms.check(), broker.alarms.memory_used)[1])

    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/backlog")
    confirmed = _publish(sender, 300)  # 6 MB of bodies
    assert all(d.remote_state == d.ACCEPTED for d in confirmed)
    node.call(setattr, broker.alarms, "memory_high_watermark", baseline + 4 * MiB)  # bytes: a budget it exceeds
    node.call(broker.alarms.check)
    assert broker.alarms.memory and broker.alarms.memory_used >= baseline + 300 * len(BODY)
    # the alarm's input is what /api/nodes and Prometheus report (RSS stays rabbitmq_process_resident_memory_bytes)
    (reported,) = Api(broker.http_port).get("/api/nodes").body
    assert reported["mem_alarm"] and reported["mem_used"] >= baseline + 300 * len(BODY)
    assert sample(scrape(node), "warren_memory_used_bytes") >= baseline + 300 * len(BODY)
    conn.wait(lambda: sender.link.credit <= 0, timeout=20, msg="the publisher was not held")

    assert _drain(node.url, "/queues/backlog", 300) == list(range(300))
    node.call(broker.alarms.check)
    assert not broker.alarms.memory, broker.memory.breakdown()
    assert broker.alarms.memory_used < baseline + 2 * MiB
    assert broker.memory.trims >= 1  # malloc_trim after the release

    # the same connection and link publish again once credit comes back
    conn.wait(lambda: sender.link.credit > 0, timeout=20, msg="credit did not come back after the alarm")
    again = _publish(sender, 10, start=300)
    assert all(d.remote_state == d.ACCEPTED for d in again)
    conn.close()
    assert _drain(node.url, "/queues/backlog", 10) == list(range(300, 310))


def test_a_full_disk_holds_publishers_confirms_the_waiting_ones_late_and_recovers(broker_factory, tmp_path):
    with mount_tmpfs(tmp_path / "fs", 96 * MiB) as fs:
        # disk_free_limit 0: the free-space check stays quiet, so the publishes meet ENOSPC itself
        node = broker_factory(os.path.join(fs, "data"), disk_free_limit=0, alarm_check_interval=0.05)
        try:
            _fill_and_free(node, fs)
        finally:
            node.stop()  # before the filesystem goes


def _fill_and_free(node, fs) -> None:
    """Publishes, fills the filesystem, publishes into ENOSPC, frees it, publishes again, drains."""
    broker = node.broker
    node.declare_queue("full")
    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/full")
    before = _publish(sender, 50)
    assert all(d.remote_state == d.ACCEPTED for d in before)

    filler = fill(fs)
    # sent together, before the alarm can take the credit: the first write fails, the rest meet a
    # full store; each waits for room, since its message is in the queue already
    waiting = [sender.link.send(Message(id=50 + i, body=BODY, durable=True)) for i in range(5)]
    conn.wait(lambda: broker.committer.out_of_space, timeout=20, msg="the write did not meet the full disk")
    node.call(broker.alarms.check)
    assert broker.alarms.disk
    conn.wait(lambda: sender.link.credit <= 0, timeout=20, msg="the publisher was not held")
    assert not any(d.settled for d in waiting)
    # the management API's publish is held too (as an AMQP publisher), with the alarm named
    http = {"routing_key": "full", "payload": "by http", "payload_encoding": "string",
            "properties": {"delivery_mode": 2, "message_id": 99}}  # fmt: skip
    reply = Api(broker.http_port).post("/api/exchanges/%2F/amq.default/publish", http)
    assert reply.status == 503 and "disk on" in reply.body["reason"]

    os.remove(filler)
    conn.wait(lambda: all(d.settled for d in waiting), timeout=20, msg="the waiting publishes were not confirmed")
    assert all(d.remote_state == d.ACCEPTED for d in waiting)
    conn.wait(lambda: sender.link.credit > 0, timeout=20, msg="publishing did not resume after space came back")
    assert not broker.committer.out_of_space and broker.committer.failed is None
    after = _publish(sender, 20, start=100)
    assert all(d.remote_state == d.ACCEPTED for d in after)
    conn.close()

    # every message is there once, in order: those that waited out the full disk too
    assert _drain(node.url, "/queues/full", 75) == list(range(55)) + list(range(100, 120))
    assert node.call(lambda: node.queue("full").message_count) == 0


def test_quorum_replicas_count_their_messages(broker):
    node = broker
    node.call(node.vhost.declare_queue, "qq", True, None, False, {"x-queue-type": "quorum"})
    empty = node.call(lambda: node.broker.memory.breakdown()["quorum_queues"])
    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/qq")
    assert all(d.remote_state == d.ACCEPTED for d in _publish(sender, 50))
    conn.close()
    held = node.call(lambda: node.broker.memory.breakdown()["quorum_queues"])
    assert held >= empty + 50 * memory.QUORUM_INDEX_BYTES
    assert _drain(node.url, "/queues/qq", 50) == list(range(50))
    node.call(node.queue("qq").purge)  # returns once the settlements sent so far are applied
    assert node.call(lambda: node.broker.memory.breakdown()["quorum_queues"]) == empty
