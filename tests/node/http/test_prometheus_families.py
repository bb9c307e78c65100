"""The Prometheus families RabbitMQ's dashboards read beyond the first ones
(test_prometheus.py): churn counters, publishers and consumers, deliveries
by acknowledgement mode, the message size histogram, process limits and
uptime, RabbitMQ 4's Raft names, and the /metrics/detailed and
/metrics/memory-breakdown endpoints, each moving as real clients act."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from mgmt_client import sample, scrape
from proton import Message, ProtonException
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection

AMQP10 = {"protocol": "amqp10"}
CLASSIC = {"protocol": "amqp10", "queue_type": "rabbit_classic_queue"}


def page(node, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{node.broker.metrics_port}{path}", timeout=10) as r:
        return r.read().decode()


def test_churn_counters_follow_queues_sessions_and_connections(api, node):
    node.declare_queue("a")
    node.declare_queue("a")  # a redeclaration: declared, not created
    assert api.put("/api/queues/%2F/b", {"durable": True}).status == 201
    assert api.delete("/api/queues/%2F/b").status == 204
    conn = BlockingConnection(node.url, timeout=10)
    conn.create_sender("/queues/a")
    text = scrape(node)
    assert sample(text, "rabbitmq_queues_declared_total") == 3
    assert sample(text, "rabbitmq_queues_created_total") == 2
    assert sample(text, "rabbitmq_queues_deleted_total") == 1
    assert sample(text, "rabbitmq_channels_opened_total") == 1
    assert sample(text, "rabbitmq_channels_closed_total") == 0
    assert sample(text, "rabbitmq_global_publishers", **AMQP10) == 1
    assert sample(text, "rabbitmq_global_consumers", **AMQP10) == 0
    conn.close()
    text = scrape(node)
    assert sample(text, "rabbitmq_channels_closed_total") == 1
    assert sample(text, "rabbitmq_connections_closed_total") == 1
    assert sample(text, "rabbitmq_global_publishers", **AMQP10) == 0


def test_deliveries_by_acknowledgement_mode_and_message_sizes(node):
    node.declare_queue("q")
    conn = BlockingConnection(node.url, timeout=10)
    sender = conn.create_sender("/queues/q")
    for size in (10, 500, 500, 20_000):
        sender.send(Message(body=b"x" * size))
    manual = conn.create_receiver("/queues/q", credit=1)
    manual.receive(timeout=10)
    manual.accept()
    manual.close()
    auto = conn.create_receiver("/queues/q", credit=3, options=AtMostOnce())  # settles nothing: auto-ack
    for _ in range(3):
        auto.receive(timeout=10)
    text = scrape(node)
    assert sample(text, "rabbitmq_global_consumers", **AMQP10) == 1
    assert sample(text, "rabbitmq_global_messages_delivered_consume_manual_ack_total", **CLASSIC) == 1
    assert sample(text, "rabbitmq_global_messages_delivered_consume_auto_ack_total", **CLASSIC) == 3
    assert sample(text, "rabbitmq_global_messages_delivered_total", **CLASSIC) == 4
    for name in ("delivered_get_manual_ack", "delivered_get_auto_ack", "get_empty"):  # AMQP 1.0 has no get
        assert sample(text, f"rabbitmq_global_messages_{name}_total", **CLASSIC) == 0
    # each message's encoded size: its body and a few bytes of framing
    assert sample(text, "rabbitmq_message_size_bytes_bucket", le="100.0", **AMQP10) == 1
    assert sample(text, "rabbitmq_message_size_bytes_bucket", le="1000.0", **AMQP10) == 3
    assert sample(text, "rabbitmq_message_size_bytes_bucket", le="10000.0", **AMQP10) == 3
    assert sample(text, "rabbitmq_message_size_bytes_bucket", le="100000.0", **AMQP10) == 4
    assert sample(text, "rabbitmq_message_size_bytes_bucket", le="+Inf", **AMQP10) == 4
    assert sample(text, "rabbitmq_message_size_bytes_count", **AMQP10) == 4
    assert 21_010 <= sample(text, "rabbitmq_message_size_bytes_sum", **AMQP10) < 21_010 + 4 * 50
    conn.close()


def test_process_limits_and_uptime(node):
    text = scrape(node)
    assert 0 < sample(text, "rabbitmq_process_open_fds") < sample(text, "rabbitmq_process_max_fds")
    assert sample(text, "rabbitmq_erlang_uptime_seconds") > 0


def test_raft_families_under_rabbitmq_4_names(node):
    from metadata import commands as mc
    from node.vhosts.metadata_store import new_key

    node.metadata(mc.EnableFeatureFlag(new_key(), "quorum_queue_v1"))
    node.declare_queue("qq", **{"x-queue-type": "quorum"})
    conn = BlockingConnection(node.url, timeout=10)
    sender = conn.create_sender("/queues/qq")
    for i in range(5):
        sender.send(Message(body=f"m{i}"))
    conn.close()
    text = scrape(node)
    qq = {"vhost": "/", "queue": "qq"}
    commit = sample(text, "rabbitmq_raft_commit_index", **qq)
    assert commit >= 5 and commit == sample(text, "rabbitmq_raft_log_commit_index", **qq)
    assert sample(text, "rabbitmq_raft_last_written_index", **qq) >= commit
    assert sample(text, "rabbitmq_raft_term", **qq) == sample(text, "rabbitmq_raft_term_total", **qq) >= 1
    assert 0 < sample(text, "rabbitmq_raft_commit_latency_seconds", **qq) < 5  # the proposals were timed
    assert "# TYPE rabbitmq_raft_snapshot_index gauge" in text


def test_detailed_families_by_group_and_vhost(api, node):
    from metadata import commands as mc
    from node.vhosts.metadata_store import new_key

    node.metadata(mc.EnableFeatureFlag(new_key(), "quorum_queue_v1"))
    assert api.put("/api/vhosts/other", {}).status == 201
    node.declare_queue("here", **{"x-queue-type": "quorum"})
    conn = BlockingConnection(node.url, timeout=10)
    conn.create_sender("/queues/here").send(Message(body="m"))  # accepted once committed: it has its leader
    conn.close()
    assert api.put("/api/queues/other/there", {"durable": True}).status == 201
    text = page(node, "/metrics/detailed?family=queue_coarse_metrics&family=exchange_names&family=ra_metrics"
                      "&vhost=%2F")  # fmt: skip
    assert sample(text, "rabbitmq_detailed_queue_messages_ready", vhost="/", queue="here") == 1
    assert sample(text, "rabbitmq_detailed_queue_info", vhost="/", queue="here", queue_type="rabbit_quorum_queue",
                  membership="leader") == 1  # fmt: skip
    assert sample(text, "rabbitmq_cluster_exchange_name", vhost="/", exchange="amq.topic", type="topic") == 1
    assert sample(text, "rabbitmq_detailed_raft_term", vhost="/", queue="here") >= 1
    assert 'vhost="other"' not in text
    for absent in ("rabbitmq_detailed_queue_consumers", "rabbitmq_global_", "rabbitmq_queue_messages_ready",
                   "rabbitmq_detailed_raft_log_"):  # fmt: skip
        assert absent not in text, absent
    text = page(node, "/metrics/detailed?family=queue_metrics&family=connection_churn_metrics&family=vhost_status")
    assert sample(text, "rabbitmq_detailed_queue_consumers", vhost="other", queue="there") == 0
    assert sample(text, "rabbitmq_detailed_queues_created_total") == 2
    assert sample(text, "rabbitmq_cluster_vhost_status", vhost="other") == 1
    assert "rabbitmq_detailed_queue_messages_ready{" not in text
    # a queue name pattern, matched anywhere in the name, as RabbitMQ's
    text = page(node, "/metrics/detailed?family=queue_coarse_metrics&family=ra_metrics&queue=^her")
    assert sample(text, "rabbitmq_detailed_queue_messages_ready", vhost="/", queue="here") == 1
    assert sample(text, "rabbitmq_detailed_raft_commit_index", vhost="/", queue="here") >= 1
    assert 'queue="there"' not in text and 'raft_cluster="metadata"' not in text
    assert 'queue="there"' in page(node, "/metrics/detailed?family=queue_coarse_metrics&queue=er")
    for bad, message in (("queue=(", "Invalid 'queue' regex at position"), ("queue=a&queue=b", "Only one"),
                         ("queue=" + "a" * 2001, "too long")):  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as e:
            page(node, f"/metrics/detailed?family=queue_coarse_metrics&{bad}")
        assert e.value.code == 400 and message in e.value.read().decode()


def test_memory_breakdown_follows_what_queues_hold(node):
    def classic(text: str) -> float:
        return sample(text, "rabbitmq_memory_classic_queue_erlang_process_bytes")

    node.declare_queue("big")
    before = page(node, "/metrics/memory-breakdown")
    assert sample(before, "rabbitmq_memory_other_system_bytes") > 1_000_000  # the interpreter's baseline
    conn = BlockingConnection(node.url, timeout=10)
    sender = conn.create_sender("/queues/big")
    for _ in range(20):
        sender.send(Message(body=b"x" * 50_000))
    conn.close()
    after = page(node, "/metrics/memory-breakdown")
    assert classic(after) >= classic(before) + 20 * 50_000
    assert "rabbitmq_queue_messages_ready" not in after


def test_authentication_attempts_by_protocol(api, node):
    conn = BlockingConnection(node.url, timeout=10)
    conn.close()
    with pytest.raises(ProtonException):  # a wrong password
        BlockingConnection(node.url.replace("guest:guest", "guest:wrong"), timeout=10)
    assert api.as_user("guest", "wrong").get("/api/overview").status == 401
    assert api.get("/api/overview").status == 200
    text = scrape(node)
    amqp, http = {"protocol": "amqp10"}, {"protocol": "http"}
    assert sample(text, "rabbitmq_auth_attempts_succeeded_total", **amqp) == 1
    assert sample(text, "rabbitmq_auth_attempts_failed_total", **amqp) == 1
    assert sample(text, "rabbitmq_auth_attempts_total", **amqp) == 2
    assert sample(text, "rabbitmq_auth_attempts_failed_total", **http) == 1
    assert sample(text, "rabbitmq_auth_attempts_succeeded_total", **http) >= 1


def test_at_least_once_dead_letters_are_counted_once_confirmed(node):
    from metadata import commands as mc
    from node.vhosts.metadata_store import new_key

    node.metadata(mc.EnableFeatureFlag(new_key(), "quorum_queue_v1"))
    node.declare_queue("dlq")
    node.declare_queue(
        "src",
        **{
            "x-queue-type": "quorum",
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dlq",
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        },
    )
    conn = BlockingConnection(node.url, timeout=10)
    conn.create_sender("/queues/src").send(Message(body="bad"))
    receiver = conn.create_receiver("/queues/src", credit=1)
    receiver.receive(timeout=10)
    receiver.reject()
    dead = conn.create_receiver("/queues/dlq", credit=1)
    assert dead.receive(timeout=20).body == "bad"  # the target queue took it: confirmed
    dead.accept()
    conn.close()
    text = scrape(node)
    labels = {"queue_type": "rabbit_quorum_queue", "dead_letter_strategy": "at_least_once"}
    assert sample(text, "rabbitmq_global_messages_dead_lettered_confirmed_total", **labels) == 1
    assert sample(text, "rabbitmq_global_messages_dead_lettered_rejected_total", **labels) == 1
