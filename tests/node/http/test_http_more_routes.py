"""RabbitMQ 4.2 routes beyond the everyday ones: runtime and global
parameters, channels (none on an AMQP 1.0 broker), AMQP 1.0 sessions and
links, a user's connections, the node's memory, quorum queue status and
replicas, and the read-only odds and ends (node_detail_routes.py)."""

from __future__ import annotations

import base64
import time

from mgmt_client import Api
from proton import Message
from proton.utils import BlockingConnection


def test_vhost_limits_and_operator_policies_are_parameters(api, node):
    assert api.get("/api/parameters").body == []
    r = api.put("/api/parameters/vhost-limits/%2F/limits", {"value": {"max-connections": 10, "max-queues": 5}})
    assert r.status == 201
    assert api.get("/api/vhost-limits/%2F").body == [{"vhost": "/", "value": {"max-connections": 10, "max-queues": 5}}]
    assert api.put("/api/parameters/vhost-limits/%2F/limits", {"value": {"max-queues": 6}}).status == 204
    assert api.get("/api/parameters/vhost-limits/%2F/limits").body == {
        "vhost": "/", "component": "vhost-limits", "name": "limits", "value": {"max-queues": 6}}  # fmt: skip
    policy = {"pattern": "^x", "definition": {"max-length": 3}, "priority": 1, "apply-to": "queues"}
    assert api.put("/api/parameters/operator_policy/%2F/op", {"value": policy}).status == 201
    assert api.get("/api/operator-policies/%2F/op").body["definition"] == {"max-length": 3}
    rows = api.get("/api/parameters").body
    assert [(p["component"], p["name"]) for p in rows] == [("vhost-limits", "limits"), ("operator_policy", "op")]
    assert api.get("/api/parameters/operator_policy").body[0]["value"] == policy
    assert api.get("/api/parameters/operator_policy/%2F").body[0]["name"] == "op"
    assert api.delete("/api/parameters/operator_policy/%2F/op").status == 204
    assert api.delete("/api/parameters/vhost-limits/%2F/limits").status == 204
    assert api.get("/api/parameters").body == []
    assert api.get("/api/parameters/vhost-limits/%2F/limits").status == 404


def test_parameters_refuse_what_warren_has_not(api, node):
    r = api.put("/api/parameters/shovel/%2F/s", {"value": {"src-uri": "amqp://"}})
    assert r.status == 400 and "src-protocol" in r.body["reason"]
    assert api.get("/api/parameters/federation-upstream").status == 400
    assert api.put("/api/parameters/vhost-limits/%2F/limits", {"value": {"max-channels": 1}}).status == 400
    assert api.put("/api/parameters/vhost-limits/%2F/limits", {}).status == 400
    assert api.put("/api/parameters/vhost-limits/nope/limits", {"value": {}}).status == 404


def test_global_parameters(api, node):
    assert api.put("/api/global-parameters/cluster_name", {"value": "rabbit-east"}).status == 201
    assert {"name": "cluster_name", "value": "rabbit-east"} in api.get("/api/global-parameters").body
    assert api.get("/api/global-parameters/cluster_name").body["value"] == "rabbit-east"
    assert api.get("/api/cluster-name").body == {"name": "rabbit-east"}
    assert api.get("/api/global-parameters/nope").status == 404
    assert api.put("/api/global-parameters/nope", {"value": "x"}).status == 400
    assert api.delete("/api/global-parameters/cluster_name").status == 400


def test_channels_sessions_and_user_connections(api, node):
    assert api.get("/api/channels").body == []
    assert api.get("/api/vhosts/%2F/channels").body == []
    assert api.get("/api/channels/x").status == 404
    api.put("/api/queues/%2F/sq")
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{node.broker.amqp_port}", timeout=10)
    try:
        sender = conn.create_sender("/queues/sq")
        sender.send(Message(body="x"))
        conn.create_receiver("/queues/sq", credit=5)
        [c] = api.get("/api/connections/username/guest").body
        assert api.get("/api/connections/username/nobody").body == []
        name = c["name"].replace(" ", "%20").replace(">", "%3E")
        assert api.get(f"/api/connections/{name}/channels").body == []
        deadline = time.monotonic() + 10
        while True:
            sessions = api.get(f"/api/connections/{name}/sessions").body
            links = [link for s in sessions for link in s["outgoing_links"]]
            if links or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        [incoming] = [link for s in sessions for link in s["incoming_links"]]
        assert incoming["target_address"] == "/queues/sq" and incoming["snd_settle_mode"] == "mixed"  # proton's default
        [outgoing] = links
        assert outgoing["source_address"] == "/queues/sq" and outgoing["queue_name"] == "sq"
        assert set(sessions[0]) >= {"channel_number", "handle_max", "next_incoming_id", "incoming_window",
                                    "outgoing_unsettled_deliveries", "incoming_links", "outgoing_links"}  # fmt: skip
        assert api.delete("/api/connections/username/guest").status == 204
    finally:
        conn.close()


def test_node_details(api, node):
    memory = api.get("/api/nodes/warren@test/memory").body["memory"]
    assert memory["total"]["allocated"] > 0 and "queue_procs" in memory
    relative = api.get("/api/nodes/warren@test/memory/relative").body["memory"]
    assert relative["total"] == 100
    assert api.get("/api/nodes/other@host/memory").status == 404
    assert api.get("/api/extensions").body == []
    assert api.get("/api/all-configuration").body["vhosts"] == api.get("/api/definitions").body["vhosts"]
    assert api.get("/api/deprecated-features").body == [] and api.get("/api/deprecated-features/used").body == []
    assert api.get("/api/version").body == "4.2.0"
    flags = api.get("/api/feature-flags").body
    assert flags == api.get("/api/feature_flags").body and all("state" in f for f in flags)
    api.put("/api/queues/%2F/dq")
    assert [q["name"] for q in api.get("/api/queues/detailed").body] == ["dq"]


def test_users_without_permissions_and_bulk_delete(api, node):
    api.put("/api/users/loner", {"password": "p", "tags": ""})
    api.put("/api/users/other", {"password": "p", "tags": ""})
    assert [u["name"] for u in api.get("/api/users/without-permissions").body] == ["loner", "other"]
    assert api.post("/api/users/bulk-delete", {"users": ["loner", "other", "ghost"]}).status == 204
    assert api.get("/api/users/loner").status == 404
    assert api.post("/api/users/bulk-delete", {"users": "loner"}).status == 400


def test_quorum_queue_status_and_replicas(api, node):
    api.put("/api/queues/%2F/qq", {"arguments": {"x-queue-type": "quorum"}})
    deadline = time.monotonic() + 15
    while (rows := api.get("/api/queues/quorum/%2F/qq/status").body)[0]["Raft State"] != "leader":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    [row] = rows
    assert row["Term"] >= 1 and row["Commit Index"] >= 1 and row["Node Name"] == "warren@test"
    api.put("/api/queues/%2F/cq")
    assert api.get("/api/queues/quorum/%2F/cq/status").status == 400
    assert api.get("/api/queues/quorum/%2F/nope/status").status == 404
    r = api.post("/api/queues/quorum/%2F/qq/replicas/add", {})
    assert r.status == 400
    r = api.post("/api/queues/quorum/replicas/on/x/grow", {"strategy": "even"})
    assert r.status == 400 and "even" in r.body["reason"]
    assert api.delete("/api/queues/quorum/replicas/on/127.0.0.1:1/shrink").status == 204  # a member of none


def test_fields_tools_read(api, node):
    [n] = api.get("/api/nodes").body
    assert n["fd_total"] > 0 and n["sockets_total"] == n["fd_total"] and n["uptime"] >= 0
    assert {x["protocol"] for x in n["listeners"]} >= {"amqp", "http"} and n["contexts"][0]["path"] == "/"
    api.put("/api/queues/%2F/fq")
    api.put("/api/queues/%2F/fqq", {"arguments": {"x-queue-type": "quorum"}})
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{node.broker.amqp_port}", timeout=10)
    try:
        conn.create_sender("/queues/fq").send(Message(body="x" * 100))
        [c] = api.get("/api/connections").body
        assert c["recv_oct"] > 100 and c["recv_cnt"] >= 1 and c["send_oct"] > 0 and c["send_cnt"] >= 1
        assert abs(c["connected_at"] - time.time() * 1000) < 60_000
    finally:
        conn.close()
    queues = {q["name"]: q for q in api.get("/api/queues").body}
    assert queues["fq"]["memory"] > 0 and queues["fqq"]["memory"] >= 0
    assert api.get("/api/queues/%2F/fq").body["memory"] == queues["fq"]["memory"]


def test_queue_message_stats_carry_rates(api, node):
    api.put("/api/queues/%2F/rq")
    management = node.broker.management
    node.call(management.sample)  # the queue's first sample (then every 5 s)
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{node.broker.amqp_port}", timeout=10)
    try:
        sender = conn.create_sender("/queues/rq")
        for _ in range(20):
            sender.send(Message(body="x"))
    finally:
        conn.close()
    stats = api.get("/api/queues/%2F/rq").body["message_stats"]
    assert stats["publish"] == 20 and stats["publish_details"]["rate"] > 0
    assert set(stats) >= {"ack_details", "deliver_get_details", "redeliver_details"}
    api.delete("/api/queues/%2F/rq")
    node.call(management.sample)
    assert ("/", "rq") not in management.queue_rates


def test_queue_and_vhost_message_counts_carry_signed_rates(api, node):
    api.put("/api/queues/%2F/cq")
    management = node.broker.management
    node.call(management.sample)  # the first sample of the counts (then every 5 s)
    for i in range(6):
        api.post("/api/exchanges/%2F/amq.default/publish", {"routing_key": "cq", "payload": str(i),
                                                            "payload_encoding": "string", "properties": {}})  # fmt: skip
    queue, vhost = api.get("/api/queues/%2F/cq").body, api.get("/api/vhosts/%2F").body
    totals = api.get("/api/overview").body["queue_totals"]
    for body in (queue, vhost, totals):
        assert body["messages"] == body["messages_ready"] == 6 and body["messages_unacknowledged"] == 0
        assert body["messages_details"]["rate"] > 0 and body["messages_ready_details"]["rate"] > 0
        assert body["messages_unacknowledged_details"] == {"rate": 0.0}
    node.call(management.sample)
    node.call(management.sample)  # both samples now hold 6: the rate is the change since the older
    api.delete("/api/queues/%2F/cq/contents")
    assert api.get("/api/queues/%2F/cq").body["messages_details"]["rate"] < 0  # going down: a negative rate
    api.delete("/api/queues/%2F/cq")
    node.call(management.sample)
    assert ("/", "cq") not in management.queue_counts


def test_overview_churn_rates(api, node):
    api.put("/api/queues/%2F/c1")
    api.put("/api/queues/%2F/c1")
    api.put("/api/queues/%2F/c2")
    api.delete("/api/queues/%2F/c2")
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{node.broker.amqp_port}", timeout=10)
    conn.create_sender("/queues/c1")
    conn.close()
    deadline = time.monotonic() + 10
    while (churn := api.get("/api/overview").body["churn_rates"])["connection_closed"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert {k: churn[k] for k in ("queue_declared", "queue_created", "queue_deleted", "connection_created",
                                  "channel_created", "channel_closed")} == {
        "queue_declared": 3, "queue_created": 2, "queue_deleted": 1, "connection_created": 1,
        "channel_created": 1, "channel_closed": 1}  # fmt: skip
    assert churn["queue_created_details"] == {"rate": churn["queue_created_details"]["rate"]}


def test_topic_permissions_of_one_exchange(api, node):
    path = "/api/topic-permissions/%2F/guest/amq.topic"
    assert api.get(path).status == 404
    assert api.put(path, {"write": "^a", "read": "^b"}).status == 201
    assert api.get(path).body == [{"user": "guest", "vhost": "/", "exchange": "amq.topic", "write": "^a", "read": "^b"}]
    assert api.put(path, {"exchange": "other", "write": ".*", "read": ".*"}).status == 400
    api.put("/api/topic-permissions/%2F/guest", {"exchange": "x2", "write": ".*", "read": ".*"})
    assert api.delete(path).status == 204
    assert [e["exchange"] for e in api.get("/api/topic-permissions/%2F/guest").body] == ["x2"]


def test_hash_password_gives_a_hash_put_user_takes(api, node):
    hashed = api.get("/api/auth/hash_password/s3cret").body["ok"]
    assert api.put("/api/users/hashed", {"password_hash": hashed, "tags": "management"}).status == 201
    assert Api(node.broker.http_port, "hashed", "s3cret").get("/api/whoami").body["name"] == "hashed"


def test_hash_password_in_rabbitmqs_format(broker_factory):
    node = broker_factory(http_port=0, password_hashing_module="rabbit_password_hashing_sha256")
    api = Api(node.broker.http_port)
    hashed = api.get("/api/auth/hash_password/s3cret").body["ok"]
    assert len(base64.b64decode(hashed)) == 4 + 32  # salt + SHA-256, as RabbitMQ's
    body = {"password_hash": hashed, "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": "management"}
    assert api.put("/api/users/r", body).status == 201
    assert Api(node.broker.http_port, "r", "s3cret").get("/api/whoami").status == 200


def test_starting_a_running_vhost(api, node):
    assert api.post("/api/vhosts/%2F/start/warren@test").status == 204
    assert api.post(f"/api/vhosts/%2F/start/{node.broker.node_id}").status == 204
    r = api.post("/api/vhosts/%2F/start/rabbit@elsewhere")
    assert r.status == 400 and r.body["reason"] == "Unknown node: rabbit@elsewhere"
    assert api.post("/api/vhosts/nope/start/warren@test").status == 404


def test_a_stream_reports_its_log(api, node):
    """committed_offset and segments as RabbitMQ's stream queues; first_offset and
    log_bytes, Warren's: what the console's stream view shows."""
    assert api.put("/api/queues/%2F/log-s", {"arguments": {"x-queue-type": "stream",
                                                           "x-stream-max-segment-size-bytes": 200}}).status == 201  # fmt: skip
    empty = api.get("/api/queues/%2F/log-s").body
    assert (empty["first_offset"], empty["committed_offset"], empty["log_bytes"]) == (0, -1, 0)
    for _ in range(6):
        body = {"routing_key": "log-s", "payload": "x" * 100, "payload_encoding": "string", "properties": {}}
        assert api.post("/api/exchanges/%2F/amq.default/publish", body).body == {"routed": True}
    q = api.get("/api/queues/%2F/log-s").body
    assert q["first_offset"] == 0 and q["committed_offset"] == 5
    assert q["segments"] > 1  # 100-byte messages in 200-byte segments
    assert q["log_bytes"] > 600
    api.put("/api/queues/%2F/classic")
    assert "segments" not in api.get("/api/queues/%2F/classic").body
