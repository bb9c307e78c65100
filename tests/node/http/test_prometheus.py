"""The Prometheus endpoint: RabbitMQ's metric names and labels, values read
from the node at scrape time, moving as real AMQP clients publish, consume
and dead-letter."""

from __future__ import annotations

import urllib.request

from mgmt_client import sample, scrape
from proton import Message
from proton.utils import BlockingConnection

NAMES = [
    "rabbitmq_identity_info",
    "rabbitmq_build_info",
    "rabbitmq_connections",
    "rabbitmq_channels",
    "rabbitmq_consumers",
    "rabbitmq_queues",
    "rabbitmq_connections_opened_total",
    "rabbitmq_connections_closed_total",
    "rabbitmq_global_messages_received_total",
    "rabbitmq_global_messages_routed_total",
    "rabbitmq_global_messages_unroutable_dropped_total",
    "rabbitmq_global_messages_confirmed_total",
    "rabbitmq_global_messages_delivered_total",
    "rabbitmq_global_messages_redelivered_total",
    "rabbitmq_global_messages_acknowledged_total",
    "rabbitmq_global_messages_dead_lettered_expired_total",
    "rabbitmq_global_messages_dead_lettered_rejected_total",
    "rabbitmq_global_messages_dead_lettered_maxlen_total",
    "rabbitmq_global_messages_dead_lettered_delivery_limit_total",
    "rabbitmq_queue_messages_ready",
    "rabbitmq_queue_messages_unacked",
    "rabbitmq_queue_messages",
    "rabbitmq_queue_consumers",
    "rabbitmq_alarms_memory_used_watermark",
    "rabbitmq_alarms_free_disk_space_watermark",
    "rabbitmq_process_resident_memory_bytes",
    "rabbitmq_disk_space_available_bytes",
    "warren_memory_used_bytes",
]
AMQP10 = {"protocol": "amqp10"}
CLASSIC = {"protocol": "amqp10", "queue_type": "rabbit_classic_queue"}


def test_every_metric_is_exposed_in_the_text_format(node):
    node.declare_queue("q")
    with urllib.request.urlopen(f"http://127.0.0.1:{node.broker.metrics_port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    for name in NAMES:
        assert f"\n{name}" in text or text.startswith(name), name
        assert f"# TYPE {name} " in text, name
    assert sample(text, "rabbitmq_identity_info", rabbitmq_node="warren@test") == 1
    assert sample(text, "rabbitmq_queue_messages_ready") == 0  # aggregated, RabbitMQ's default
    assert 'queue="q"' not in text
    assert sample(text, "rabbitmq_global_messages_received_total", **AMQP10) == 0
    per_object = scrape(node)
    assert sample(per_object, "rabbitmq_queue_messages_ready", vhost="/", queue="q") == 0


def test_values_follow_publishing_and_consuming(node):
    node.declare_queue("work")
    before = scrape(node)
    assert sample(before, "rabbitmq_connections") == 0
    conn = BlockingConnection(node.url, timeout=10)
    sender = conn.create_sender("/queues/work")
    for i in range(5):
        sender.send(Message(body=f"m{i}", durable=True))
    unroutable = conn.create_sender("/exchanges/amq.direct/nobody")
    try:
        unroutable.send(Message(body="lost"))
    except Exception:
        pass  # released: unroutable
    text = scrape(node)
    assert sample(text, "rabbitmq_global_messages_received_total", **AMQP10) == 6
    assert sample(text, "rabbitmq_global_messages_routed_total", **AMQP10) == 5
    assert sample(text, "rabbitmq_global_messages_confirmed_total", **AMQP10) == 5
    assert sample(text, "rabbitmq_global_messages_received_confirm_total", **AMQP10) == 6  # all sent unsettled
    # RabbitMQ counts an unroutable message sent unsettled (released back) as returned, not dropped
    assert sample(text, "rabbitmq_global_messages_unroutable_returned_total", **AMQP10) == 1
    assert sample(text, "rabbitmq_global_messages_unroutable_dropped_total", **AMQP10) == 0
    assert sample(text, "rabbitmq_queue_messages_ready", vhost="/", queue="work") == 5
    assert sample(text, "rabbitmq_connections") == 1
    assert sample(text, "rabbitmq_channels") >= 1
    assert sample(text, "rabbitmq_connections_opened_total") == 1

    receiver = conn.create_receiver("/queues/work", credit=5)
    for _ in range(3):
        receiver.receive(timeout=10)
        receiver.accept()
    text = scrape(node)
    assert sample(text, "rabbitmq_consumers") == 1
    assert sample(text, "rabbitmq_queue_consumers", vhost="/", queue="work") == 1
    assert sample(text, "rabbitmq_global_messages_delivered_total", **CLASSIC) >= 3
    receiver.close()  # a round trip: the node has the settlements
    text = scrape(node)
    assert sample(text, "rabbitmq_global_messages_acknowledged_total", **CLASSIC) == 3
    assert sample(text, "rabbitmq_queue_messages_unacked", vhost="/", queue="work") == 0
    assert sample(text, "rabbitmq_queue_messages", vhost="/", queue="work") == 2
    conn.close()


def test_dead_lettering_is_counted_by_reason(node):
    node.declare_queue("dlq")
    node.declare_queue("src", **{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    conn = BlockingConnection(node.url, timeout=10)
    conn.create_sender("/queues/src").send(Message(body="bad"))
    receiver = conn.create_receiver("/queues/src", credit=1)
    receiver.receive(timeout=10)
    receiver.reject()
    conn.close()
    text = scrape(node)
    labels = {"queue_type": "rabbit_classic_queue", "dead_letter_strategy": "at_most_once"}
    assert sample(text, "rabbitmq_global_messages_dead_lettered_rejected_total", **labels) == 1
    assert sample(text, "rabbitmq_global_messages_dead_lettered_expired_total", **labels) == 0
    assert sample(text, "rabbitmq_queue_messages_ready", vhost="/", queue="dlq") == 1


def test_alarm_gauges(node):
    assert sample(scrape(node), "rabbitmq_alarms_free_disk_space_watermark") == 0
    node.call(node.broker.alarms.force, "disk", True)
    try:
        text = scrape(node)
        assert sample(text, "rabbitmq_alarms_free_disk_space_watermark") == 1
        assert sample(text, "rabbitmq_alarms_memory_used_watermark") == 0
    finally:
        node.call(node.broker.alarms.force, "disk", False)


def test_raft_families_for_the_metadata_group_and_each_quorum_queue(node):
    from metadata import commands as mc
    from node.vhosts.metadata_store import new_key

    meta = {"vhost": "", "queue": "", "raft_cluster": "metadata"}
    text = scrape(node)
    assert sample(text, "rabbitmq_raft_leader", **meta) == 1  # a single node leads its metadata group
    assert sample(text, "rabbitmq_raft_members", **meta) == 1
    assert sample(text, "rabbitmq_raft_term_total", **meta) >= 1
    commit = sample(text, "rabbitmq_raft_log_commit_index", **meta)
    assert commit >= 1
    assert sample(text, "rabbitmq_raft_log_last_applied_index", **meta) == commit
    assert sample(text, "rabbitmq_raft_log_last_written_index", **meta) >= commit
    for name in ("rabbitmq_raft_log_snapshot_index", "rabbitmq_raft_log_entries"):
        assert f"# TYPE {name} gauge" in text

    node.metadata(mc.EnableFeatureFlag(new_key(), "quorum_queue_v1"))
    node.declare_queue("qq", **{"x-queue-type": "quorum"})
    after = scrape(node)
    assert sample(after, "rabbitmq_raft_log_commit_index", **meta) > commit  # the declaration went through it
    qq = {"vhost": "/", "queue": "qq"}
    assert sample(after, "rabbitmq_raft_members", **qq) == 1
    before = sample(after, "rabbitmq_raft_log_commit_index", **qq)
    conn = BlockingConnection(node.url, timeout=10)
    sender = conn.create_sender("/queues/qq")
    for i in range(10):
        sender.send(Message(body=f"m{i}", durable=True))  # accepted once committed and applied: it has a leader
    conn.close()
    text = scrape(node)
    assert sample(text, "rabbitmq_raft_leader", **qq) == 1
    assert sample(text, "rabbitmq_raft_term_total", **qq) >= 1
    assert sample(text, "rabbitmq_raft_log_commit_index", **qq) > before
    assert sample(text, "rabbitmq_raft_log_last_applied_index", **qq) > before
    assert sample(text, "rabbitmq_raft_log_last_written_index", **qq) >= sample(
        text, "rabbitmq_raft_log_commit_index", **qq)
    assert sample(text, "rabbitmq_raft_log_entries", **qq) >= 1
    # a classic queue has no Raft group
    node.declare_queue("classic")
    try:
        sample(scrape(node), "rabbitmq_raft_log_commit_index", vhost="/", queue="classic")
        raise AssertionError("a classic queue has Raft series")
    except KeyError:
        pass


def _reject_one(node, queue: str) -> None:
    conn = BlockingConnection(node.url, timeout=10)
    conn.create_sender(f"/queues/{queue}").send(Message(body="bad"))
    receiver = conn.create_receiver(f"/queues/{queue}", credit=1)
    receiver.receive(timeout=10)
    receiver.reject()
    receiver.close()  # a round trip: the node has the rejection
    conn.close()


def test_counters_carry_the_real_queue_type_and_drops_count_as_disabled(node):
    node.declare_queue("qq", **{"x-queue-type": "quorum"})
    node.declare_queue("cq")
    _reject_one(node, "qq")  # no dead-letter exchange: dropped
    _reject_one(node, "cq")
    queue = node.queue("qq")
    node.call(queue.purge)  # once the rejection is applied
    text = scrape(node)
    quorum = {"protocol": "amqp10", "queue_type": "rabbit_quorum_queue"}
    assert sample(text, "rabbitmq_global_messages_delivered_total", **quorum) == 1
    assert sample(text, "rabbitmq_global_messages_delivered_total", **CLASSIC) == 1
    assert sample(text, "rabbitmq_global_messages_acknowledged_total", **quorum) == 1
    for queue_type in ("rabbit_quorum_queue", "rabbit_classic_queue"):
        disabled = {"queue_type": queue_type, "dead_letter_strategy": "disabled"}
        assert sample(text, "rabbitmq_global_messages_dead_lettered_rejected_total", **disabled) == 1
        at_most_once = {"queue_type": queue_type, "dead_letter_strategy": "at_most_once"}
        assert sample(text, "rabbitmq_global_messages_dead_lettered_rejected_total", **at_most_once) == 0
    at_least_once = {"queue_type": "rabbit_quorum_queue", "dead_letter_strategy": "at_least_once"}
    assert sample(text, "rabbitmq_global_messages_dead_lettered_maxlen_total", **at_least_once) == 0


def test_aggregated_metrics_sum_each_family_over_its_objects(node):
    """/metrics without return_per_object_metrics (RabbitMQ's default): one
    series per family and remaining labels, the per-queue values summed;
    rabbitmq_queue_info, one constant per queue, is left out as RabbitMQ does."""
    node.declare_queue("a")
    node.declare_queue("b")
    conn = BlockingConnection(node.url, timeout=10)
    try:
        for address, n in (("/queues/a", 2), ("/queues/b", 3)):
            sender = conn.create_sender(address)
            for i in range(n):
                sender.send(Message(body=f"m{i}"))
        aggregated = scrape(node, "/metrics")
        per_object = scrape(node)
    finally:
        conn.close()
    assert sample(per_object, "rabbitmq_queue_messages_ready", vhost="/", queue="a") == 2
    assert sample(per_object, "rabbitmq_queue_messages_ready", vhost="/", queue="b") == 3
    assert sample(aggregated, "rabbitmq_queue_messages_ready") == 5
    assert sample(aggregated, "rabbitmq_queue_messages") == 5
    ready = [line for line in aggregated.splitlines() if line.startswith("rabbitmq_queue_messages_ready ")]
    assert ready == ["rabbitmq_queue_messages_ready 5.0"]
    assert "rabbitmq_queue_info" in per_object and "rabbitmq_queue_info" not in aggregated
    # families that label no object keep their labels
    assert sample(aggregated, "rabbitmq_global_messages_received_total", **AMQP10) == 5
    assert sample(aggregated, "rabbitmq_identity_info", rabbitmq_endpoint="aggregated") == 1
