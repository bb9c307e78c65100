"""A node whose Raft log cannot write for want of space (ENOSPC injected
through the test-fault hook, storage/faults.py) stays up: it raises the disk
alarm, holds its publishers, keeps serving reads, refuses metadata changes
cleanly, and once the log writes again takes publishes with every confirmed
message there. An EIO is still fail-stop. The last test fills a real small
tmpfs holding the node's data directory, and frees it."""

from __future__ import annotations

import os

from mgmt_client import Api
from proton import Message
from proton.utils import BlockingConnection
from received import receive_ids
from tmpfs import fill, mount_tmpfs  # tests/support/

QQ = {"x-queue-type": "quorum"}
MiB = 1024 * 1024
BIG = "b" * (64 * 1024)  # more than the free space fill() leaves: the write meets ENOSPC


def _publish(sender, n: int, start: int = 0) -> list:
    return [sender.send(Message(id=start + i, body=f"m{start + i}", durable=True), error_states=[]) for i in range(n)]


def _drain(url: str, address: str, n: int) -> list:
    conn = BlockingConnection(url, timeout=20)
    try:
        return receive_ids(conn.create_receiver(address, credit=50), n, timeout=20)
    finally:
        conn.close()


def _faulty_node(broker_factory):
    # the free-space check stays quiet (limit 0): only the failed write raises the disk alarm
    return broker_factory(enable_test_faults=True, disk_free_limit=0, alarm_check_interval=0.05,
                          cluster_command_timeout=1.0)  # fmt: skip


def test_a_full_raft_log_holds_publishers_keeps_reads_and_loses_no_confirmed_message(broker_factory):
    node = _faulty_node(broker_factory)
    broker, api = node.broker, Api(node.broker.http_port)
    node.call(node.vhost.declare_queue, "qq", True, None, False, QQ)
    node.declare_queue("classic")
    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/qq")
    before = _publish(sender, 30)
    assert all(d.remote_state == d.ACCEPTED for d in before)
    classic = conn.create_sender("/queues/classic")
    assert all(d.remote_state == d.ACCEPTED for d in _publish(classic, 5))

    armed = api.post("/api/cluster/test/disk_fault", {"store": "raft", "op": "write", "error": "ENOSPC", "count": None})
    assert armed.status == 200, armed.body
    # sent before the alarm can take the credit: appended in memory, never confirmed while the log is full
    waiting = [sender.link.send(Message(id=100 + i, body=f"m{100 + i}", durable=True)) for i in range(3)]
    conn.wait(lambda: broker.cluster.out_of_space, timeout=20, msg="the raft log write did not fail")
    node.call(broker.alarms.check)
    assert broker.alarms.disk and broker.cluster.failed is None
    conn.wait(lambda: sender.link.credit <= 0, timeout=20, msg="the publisher was not held")
    assert not any(d.settled for d in waiting)

    # the node serves: its API, a classic queue's consumer; a metadata change fails cleanly
    assert api.get("/api/overview").status == 200
    assert api.get("/api/cluster").body["raft_log_out_of_space"] is True
    assert api.get("/api/cluster/test/disk_fault").body["fired"]["raft"] >= 1
    assert _drain(node.url, "/queues/classic", 5) == list(range(5))
    refused = api.put("/api/queues/%2F/later", {"durable": True, "arguments": QQ})
    assert refused.status == 503, refused.body
    assert "later" not in node.vhost.queues

    assert api.delete("/api/cluster/test/disk_fault").status == 200
    conn.wait(lambda: all(d.settled for d in waiting), timeout=20, msg="the held publishes were not settled")
    assert all(d.remote_state == d.ACCEPTED for d in waiting)  # written once there was room, then confirmed
    conn.wait(lambda: sender.link.credit > 0, timeout=20, msg="publishing did not resume")
    node.call(broker.alarms.check)
    assert not broker.alarms.disk and not broker.cluster.out_of_space and broker.cluster.failed is None
    assert api.get("/api/cluster").body["raft_log_out_of_space"] is False
    after = _publish(sender, 10, start=200)
    assert all(d.remote_state == d.ACCEPTED for d in after)
    conn.close()
    assert api.put("/api/queues/%2F/later", {"durable": True, "arguments": QQ}).status in (201, 204)
    assert _drain(node.url, "/queues/qq", 43) == [*range(30), 100, 101, 102, *range(200, 210)]


def test_an_fsync_that_finds_the_disk_full_is_written_again(broker_factory):
    node = _faulty_node(broker_factory)
    broker, api = node.broker, Api(node.broker.http_port)
    node.call(node.vhost.declare_queue, "qq", True, None, False, QQ)
    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/qq")
    # three fsyncs fail (the write itself went through): each retry writes the batch again
    assert api.post("/api/cluster/test/disk_fault", {"store": "raft", "op": "fsync", "error": "EDQUOT",
                                                     "count": 3}).status == 200  # fmt: skip
    sent = _publish(sender, 5)
    assert all(d.remote_state == d.ACCEPTED for d in sent)
    assert api.get("/api/cluster/test/disk_fault").body == {"armed": [], "fired": {"messages": 0, "raft": 3,
                                                                                     "stream": 0}}  # fmt: skip
    assert broker.cluster.failed is None
    conn.close()
    assert _drain(node.url, "/queues/qq", 5) == list(range(5))


def test_an_io_error_in_the_raft_log_is_still_fail_stop(broker_factory):
    node = _faulty_node(broker_factory)
    api = Api(node.broker.http_port)
    node.call(node.vhost.declare_queue, "qq", True, None, False, QQ)
    assert api.post("/api/cluster/test/disk_fault", {"store": "raft", "error": "EIO"}).status == 200
    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/qq")
    sender.link.send(Message(id=1, body="m", durable=True))
    conn.wait(lambda: node.broker.cluster.failed is not None, timeout=20, msg="EIO did not stop the cluster part")
    assert "Input/output error" in str(node.broker.cluster.failed)
    conn.close()


def test_the_disk_fault_hook_checks_its_input_and_exists_only_with_test_faults(broker_factory, tmp_path):
    node = _faulty_node(broker_factory)
    api = Api(node.broker.http_port)
    assert api.post("/api/cluster/test/disk_fault", {"store": "tape"}).status == 400
    assert api.post("/api/cluster/test/disk_fault", {"store": "raft", "error": "EPERM"}).status == 400
    assert api.post("/api/cluster/test/disk_fault", {"store": "raft", "op": "read"}).status == 400
    assert api.post("/api/cluster/test/disk_fault", {"store": "raft", "count": 0}).status == 400
    assert api.delete("/api/cluster/test/disk_fault?store=tape").status == 400
    plain = broker_factory(tmp_path / "plain")
    assert Api(plain.broker.http_port).get("/api/cluster/test/disk_fault").status == 404
    assert Api(plain.broker.http_port).post("/api/cluster/test/disk_fault", {"store": "raft"}).status == 404


def test_a_real_full_filesystem_under_a_quorum_queue_is_waited_out(broker_factory, tmp_path):
    with mount_tmpfs(tmp_path / "fs", 96 * MiB) as fs:
        node = broker_factory(os.path.join(fs, "data"), disk_free_limit=0, alarm_check_interval=0.05)
        try:
            _fill_and_free(node, fs)
        finally:
            node.stop()  # before the filesystem goes


def _fill_and_free(node, fs) -> None:
    broker = node.broker
    node.call(node.vhost.declare_queue, "qq", True, None, False, QQ)
    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/qq")
    assert all(d.remote_state == d.ACCEPTED for d in _publish(sender, 30))

    filler = fill(fs)
    waiting = [sender.link.send(Message(id=100 + i, body=BIG, durable=True)) for i in range(3)]
    conn.wait(lambda: broker.cluster.out_of_space, timeout=20, msg="the raft log write did not fail")
    conn.wait(lambda: broker.alarms.disk, timeout=20, msg="no disk alarm")
    conn.wait(lambda: sender.link.credit <= 0, timeout=20, msg="the publisher was not held")
    assert broker.cluster.failed is None and not any(d.settled for d in waiting)

    os.remove(filler)
    conn.wait(lambda: all(d.settled for d in waiting), timeout=30, msg="the held publishes were not settled")
    assert all(d.remote_state == d.ACCEPTED for d in waiting)
    conn.wait(lambda: sender.link.credit > 0, timeout=20, msg="publishing did not resume")
    assert all(d.remote_state == d.ACCEPTED for d in _publish(sender, 10, start=200))
    assert broker.cluster.failed is None
    conn.close()
    assert _drain(node.url, "/queues/qq", 43) == [*range(30), 100, 101, 102, *range(200, 210)]


def test_the_hook_reaches_the_message_store_too(broker_factory):
    """The classic store's own full-disk path (the publish waits, written again), through the hook."""
    node = _faulty_node(broker_factory)
    broker, api = node.broker, Api(node.broker.http_port)
    node.declare_queue("classic")
    conn = BlockingConnection(node.url, timeout=20)
    sender = conn.create_sender("/queues/classic")
    assert api.post("/api/cluster/test/disk_fault", {"store": "messages", "op": "fsync", "count": 1}).status == 200
    waited = _publish(sender, 1)  # returns once settled: the store wrote its batch again
    assert waited[0].remote_state == waited[0].ACCEPTED
    assert api.get("/api/cluster/test/disk_fault").body["fired"]["messages"] == 1
    conn.wait(lambda: not broker.committer.out_of_space, timeout=20, msg="the store did not write again")
    conn.wait(lambda: sender.link.credit > 0, timeout=20, msg="publishing did not resume")
    assert all(d.remote_state == d.ACCEPTED for d in _publish(sender, 3, start=1))
    conn.close()
    # each once: the batch was written again (as on a real full disk)
    assert _drain(node.url, "/queues/classic", 4) == [0, 1, 2, 3]
