"""A stream whose segment write fails for want of space (injected through the
test-fault hook, storage/faults.py): the publishes of that write are rejected
as out of space, the node raises the disk alarm and holds its publishers,
readers go on, and once the alarm's check sees room publishing resumes with
every confirmed offset there, dense and in order."""

from __future__ import annotations

from mgmt_client import Api
from proton import Described, Message, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection

OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")


def _publish(sender, n: int, start: int = 0) -> list:
    return [sender.send(Message(id=start + i, body=f"m{start + i}", durable=True), error_states=[]) for i in range(n)]


def _read(url: str, n: int) -> list:
    conn = BlockingConnection(url, timeout=20)
    try:
        receiver = conn.create_receiver("/queues/s", credit=n,
                                        options=Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first")}))  # fmt: skip
        got = [receiver.receive(timeout=20) for _ in range(n)]
        receiver.accept()
        return [(m.id, m.annotations["x-stream-offset"]) for m in got]
    finally:
        conn.close()


def test_a_stream_write_into_a_full_disk_raises_the_alarm_and_loses_no_confirmed_offset(broker_factory):
    node = broker_factory(enable_test_faults=True, disk_free_limit=0, alarm_check_interval=3600)
    broker, api = node.broker, Api(node.broker.http_port)
    node.declare_queue("s", **{"x-queue-type": "stream"})
    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/s")
    assert all(d.remote_state == d.ACCEPTED for d in _publish(sender, 10))

    assert api.post("/api/cluster/test/disk_fault", {"store": "stream", "op": "write", "count": 1}).status == 200
    refused = _publish(sender, 1, start=100)
    assert refused[0].remote_state == refused[0].REJECTED
    assert refused[0].remote.condition.name == "amqp:resource-limit-exceeded"
    assert broker.streams.disk.waiting == ["//s"]
    node.call(broker.alarms.check)  # the check that sees the wait raises the alarm
    assert broker.alarms.disk and broker.cluster.failed is None
    conn.wait(lambda: sender.link.credit <= 0, timeout=20, msg="the publisher was not held")
    assert _read(node.url, 10) == [(i, i) for i in range(10)]  # readers go on

    node.call(broker.alarms.check)  # the next one sees room for the write: the wait ends
    assert not broker.alarms.disk and broker.streams.disk.waiting == []
    conn.wait(lambda: sender.link.credit > 0, timeout=20, msg="publishing did not resume")
    assert all(d.remote_state == d.ACCEPTED for d in _publish(sender, 5, start=200))
    conn.close()
    # the failed chunk's offsets were given again: dense, in order, only what was confirmed
    assert _read(node.url, 15) == [*((i, i) for i in range(10)), *((200 + i, 10 + i) for i in range(5))]
    assert api.get("/api/cluster/test/disk_fault").body["fired"]["stream"] == 1


def test_a_stream_fsync_error_rejects_its_publishes_and_the_stream_goes_on(broker_factory):
    node = broker_factory(enable_test_faults=True, disk_free_limit=0, alarm_check_interval=3600)
    api = Api(node.broker.http_port)
    node.declare_queue("s", **{"x-queue-type": "stream"})
    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/s")
    assert api.post("/api/cluster/test/disk_fault", {"store": "stream", "op": "fsync", "error": "EIO"}).status == 200
    refused = _publish(sender, 1)
    assert refused[0].remote_state == refused[0].REJECTED
    assert node.broker.streams.disk.waiting == []  # not a full disk: no alarm
    assert all(d.remote_state == d.ACCEPTED for d in _publish(sender, 3, start=1))
    conn.close()
    assert _read(node.url, 3) == [(1, 0), (2, 1), (3, 2)]
    # counted as refused, so the audit's conservation (published - rejected = stored) holds
    stats = node.queue("s").stats
    assert (stats.published, stats.rejected, stats.confirmed) == (4, 1, 3)
