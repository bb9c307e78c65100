"""The management HTTP API against a real node: every resource's happy path
and main errors, with real AMQP clients (python-qpid-proton) where the API
acts on them."""

from __future__ import annotations

import threading
from urllib.parse import quote

from mgmt_client import Api
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection

from node import __version__


def q(name: str) -> str:
    return quote(name, safe="")


def definitions_file(node) -> dict:
    """What the node's metadata store holds, as a definitions document."""
    return node.call(node.broker.definitions.document)


def publish(node, address: str, n: int, vhost: str | None = None) -> None:
    kw = {"virtual_host": f"vhost:{vhost}"} if vhost else {}
    conn = BlockingConnection(node.url, timeout=10, **kw)
    s = conn.create_sender(address)
    for i in range(n):
        s.send(Message(body=f"m{i}", durable=True))
    conn.close()


class ClosedByServer(MessagingHandler):
    """Connects, calls `on_open(self)` once the connection is open, and
    records the condition the server closes the connection with."""

    def __init__(self, url: str, on_open, virtual_host: str | None = None):
        super().__init__()
        self.url, self.on_open, self.virtual_host = url, on_open, virtual_host
        self.condition: str | None = None
        self.description: str | None = None
        self.error: BaseException | None = None

    def on_start(self, event):
        kw = {"virtual_host": self.virtual_host} if self.virtual_host else {}
        event.container.connect(self.url, reconnect=False, **kw)

    def on_connection_opened(self, event):
        try:
            self.on_open(self)
        except BaseException as e:  # surfaced by run()
            self.error = e
            event.connection.close()

    def _record(self, event):
        cond = event.connection.remote_condition
        if cond is not None and self.condition is None:
            self.condition, self.description = cond.name, cond.description
        event.connection.close()

    on_connection_error = _record
    on_connection_remote_close = _record

    def run(self, timeout: float = 15) -> None:
        result: dict = {}
        t = threading.Thread(target=lambda: result.setdefault("x", Container(self).run()), daemon=True)
        t.start()
        t.join(timeout)
        assert not t.is_alive(), "the client never saw its connection closed"
        if self.error is not None:
            raise self.error


# ---------------------------------------------------------------- node


def test_overview_names_warren_and_counts_objects(api, node):
    node.declare_queue("q1")
    r = api.get("/api/overview")
    assert r.status == 200
    o = r.body
    assert o["product_name"] == "Warren" and o["product_version"] == __version__
    assert o["rabbitmq_version"] == o["management_version"] == node.config.product_version
    assert o["node"] == "warren@test"
    assert o["object_totals"] == {"connections": 0, "channels": 0, "consumers": 0, "exchanges": 6, "queues": 1}
    assert o["message_stats"]["publish"] == 0 and o["message_stats"]["publish_details"] == {"rate": 0.0}
    assert {x["protocol"]: x["port"] for x in o["listeners"]} == {
        "amqp": node.port,
        "http": node.broker.http_port,
        "http/prometheus": node.broker.metrics_port,
    }
    publish(node, "/queues/q1", 3)
    o = api.get("/api/overview").body
    assert o["message_stats"]["publish"] == 3 and o["message_stats"]["confirm"] == 3
    assert o["queue_totals"]["messages"] == 3


def test_nodes_report_memory_disk_alarms_and_uptime(api, node):
    [n] = api.get("/api/nodes").body
    assert n["name"] == "warren@test" and n["running"] is True
    assert n["mem_used"] > 0 and n["disk_free"] > 0 and n["uptime"] >= 0
    assert n["mem_alarm"] is False and n["disk_free_alarm"] is False
    assert api.get("/api/nodes/warren@test").body["name"] == "warren@test"
    assert api.get("/api/nodes/other@host").status == 404
    assert api.get("/api/health/checks/alarms").body == {"status": "ok"}

    node.call(node.broker.alarms.force, "memory", True)
    try:
        [n] = api.get("/api/nodes").body
        assert n["mem_alarm"] is True
        r = api.get("/api/health/checks/alarms")
        assert r.status == 503 and r.body["alarms"] == [{"node": "warren@test", "resource": "memory"}]
    finally:
        node.call(node.broker.alarms.force, "memory", False)


def test_whoami_definitions_and_errors(api, node):
    assert api.get("/api/whoami").body == {"name": "guest", "tags": ["administrator"]}
    api.put("/api/queues/%2F/dq", {"durable": True})
    doc = api.get("/api/definitions").body
    assert [x["name"] for x in doc["queues"]] == ["dq"]
    assert api.get("/api/nothing-here").body == {"error": "Object Not Found", "reason": "Not Found"}
    r = api.request("PATCH", "/api/overview")
    assert r.status == 405
    r = api.request("PUT", "/api/vhosts/v", b"{not json")
    assert r.status == 400 and r.body["error"] == "bad_request"
    r = api.request("PUT", "/api/vhosts/v", b"[1, 2]")
    assert r.status == 400


def test_columns_and_sort_query_parameters(api, node):
    for name in ("b", "a", "c"):
        node.declare_queue(name)
    r = api.get("/api/queues?columns=name,messages&sort=name&sort_reverse=true")
    assert r.body == [{"name": n, "messages": 0} for n in ("c", "b", "a")]


# ---------------------------------------------------------------- vhosts


def test_vhost_create_update_list_delete(api, node):
    assert api.put("/api/vhosts/v1", {"description": "first", "tags": "a,b"}).status == 201
    assert api.put("/api/vhosts/v1", {"description": "changed"}).status == 204
    v = api.get("/api/vhosts/v1").body
    assert v["name"] == "v1" and v["description"] == "changed" and v["tags"] == ["a", "b"]
    assert [x["name"] for x in api.get("/api/vhosts").body] == ["/", "v1"]
    assert api.get("/api/vhosts/%2F").body["description"] == "Default virtual host"
    # the creator may use the new vhost at once, as in RabbitMQ
    perm = api.get("/api/permissions/v1/guest").body
    assert (perm["configure"], perm["write"], perm["read"]) == (".*", ".*", ".*")
    saved = definitions_file(node)
    assert {"name": "v1", "description": "changed", "tags": ["a", "b"], "limits": {},
            "metadata": {"description": "changed", "tags": ["a", "b"]}} in saved["vhosts"]
    assert any(p["vhost"] == "v1" for p in saved["permissions"])

    assert api.delete("/api/vhosts/v1").status == 204
    assert api.get("/api/vhosts/v1").status == 404
    assert api.delete("/api/vhosts/v1").status == 404
    assert "v1" not in [v["name"] for v in definitions_file(node)["vhosts"]]


def test_paths_accept_one_trailing_slash_as_rabbitmq_does(api, node):
    # clients' helpers build "/api/vhosts/NAME/"; RabbitMQ's router ignores the slash
    assert api.put("/api/vhosts/v2/", {"description": "slashed"}).status == 201
    assert api.get("/api/vhosts/v2/").body["description"] == "slashed"
    assert "v2" in [v["name"] for v in api.get("/api/vhosts/").body]
    assert api.put("/api/queues/v2/q1/", {"durable": True}).status == 201
    assert api.get("/api/queues/v2/q1/").body["name"] == "q1"
    assert api.delete("/api/vhosts/v2/").status == 204
    assert api.get("/api/vhosts/v2").status == 404
    assert api.get("/api/vhosts/v2//").status == 404  # one slash, not any number


def test_queue_in_a_new_vhost_is_usable_over_amqp(api, node):
    api.put("/api/vhosts/app")
    assert api.put("/api/queues/app/work", {"durable": True}).status == 201
    publish(node, "/queues/work", 2, vhost="app")
    assert api.get("/api/queues/app/work").body["messages"] == 2
    assert api.get("/api/queues/%2F/work").status == 404


def test_deleting_a_vhost_closes_its_connections(api, node):
    api.put("/api/vhosts/doomed")
    other = BlockingConnection(node.url, timeout=10)  # in "/": must survive
    client = ClosedByServer(node.url, lambda c: setattr(c, "deleted", api.delete("/api/vhosts/doomed").status),
                            virtual_host="vhost:doomed")  # fmt: skip
    client.run()
    assert client.deleted == 204
    assert client.condition == "amqp:connection:forced"
    assert "doomed" in client.description
    assert [c["vhost"] for c in api.get("/api/connections").body] == ["/"]
    other.close()


# ---------------------------------------------------------------- users and permissions


def test_user_create_update_delete(api, node):
    assert api.put("/api/users/alice", {"password": "s3cret", "tags": "monitoring,management"}).status == 201
    u = api.get("/api/users/alice").body
    assert u["tags"] == ["monitoring", "management"] and u["hashing_algorithm"] == "warren_pbkdf2_sha256"
    assert api.as_user("alice", "s3cret").get("/api/whoami").body["name"] == "alice"
    # tags as a list; no password field keeps the password
    assert api.put("/api/users/alice", {"tags": ["administrator"]}).status == 204
    assert api.get("/api/users/alice").body["tags"] == ["administrator"]
    assert api.as_user("alice", "s3cret").get("/api/users").status == 200
    assert api.put("/api/users/alice", {"tags": 7}).status == 400
    assert api.put("/api/users/alice", {"password_hash": "md5:abc"}).status == 400
    assert any(x["name"] == "alice" for x in definitions_file(node)["users"])

    assert api.delete("/api/users/alice").status == 204
    assert api.get("/api/users/alice").status == 404
    assert api.delete("/api/users/alice").status == 404
    assert api.as_user("alice", "s3cret").get("/api/whoami").status == 401
    assert all(x["name"] != "alice" for x in definitions_file(node)["users"])


def test_permissions_set_validate_and_clear(api, node):
    api.put("/api/users/bob", {"password": "pw", "tags": ""})
    api.put("/api/vhosts/v2")
    body = {"configure": "^bob-", "write": ".*", "read": ".*"}
    assert api.put("/api/permissions/v2/bob", body).status == 201
    assert api.put("/api/permissions/v2/bob", dict(body, read="^$")).status == 204
    assert api.get("/api/permissions/v2/bob").body == {"user": "bob", "vhost": "v2", "configure": "^bob-",
                                                       "write": ".*", "read": "^$"}  # fmt: skip
    assert {(p["user"], p["vhost"]) for p in api.get("/api/permissions").body} >= {("bob", "v2"), ("guest", "/")}
    assert [p["vhost"] for p in api.get("/api/users/bob/permissions").body] == ["v2"]
    assert {p["user"] for p in api.get("/api/vhosts/v2/permissions").body} == {"bob", "guest"}
    assert node.broker.auth.permission("bob", "v2").read == "^$"

    r = api.put("/api/permissions/v2/bob", dict(body, write="(unclosed"))
    assert r.status == 400 and r.body["error"] == "bad_request" and "unclosed" in r.body["reason"]
    assert api.put("/api/permissions/v2/bob", {"configure": ".*"}).status == 400
    assert api.put("/api/permissions/v2/nobody", body).status == 404
    assert api.put("/api/permissions/nowhere/bob", body).status == 404
    assert any(p["user"] == "bob" for p in definitions_file(node)["permissions"])

    assert api.delete("/api/permissions/v2/bob").status == 204
    assert api.get("/api/permissions/v2/bob").status == 404
    assert api.delete("/api/permissions/v2/bob").status == 404


# ---------------------------------------------------------------- queues


def test_queue_declare_get_purge_delete(api, node):
    body = {"durable": True, "auto_delete": False, "arguments": {"x-max-length": 10}}
    assert api.put("/api/queues/%2F/orders", body).status == 201
    assert api.put("/api/queues/%2F/orders", body).status == 204
    r = api.put("/api/queues/%2F/orders", dict(body, durable=False))
    assert r.status == 400 and r.body["error"] == "bad_request" and "inequivalent" in r.body["reason"]
    r = api.put("/api/queues/%2F/orders", dict(body, arguments={"x-max-length": 11}))
    assert r.status == 400 and "inequivalent arg 'x-max-length' for queue 'orders' in vhost '/': received 11 but " \
                               "current is 10" in r.body["reason"], r.body  # fmt: skip
    r = api.put("/api/queues/nowhere/orders", body)
    assert r.status == 404 and r.body["error"] == "Object Not Found"
    assert api.put("/api/queues/%2F/bad", {"arguments": {"x-overflow": "sideways"}}).status == 400
    assert api.put("/api/queues/%2F/excl", {"exclusive": True}).status == 400
    r = api.put("/api/queues/%2F/s", {"durable": True, "arguments": {"x-queue-type": "stream",
                                                                   "x-single-active-consumer": True}})  # fmt: skip
    assert r.status == 400 and "x-single-active-consumer is not supported on a stream" in r.body["reason"], r.body
    assert api.get("/api/queues/%2F/s").status == 404
    assert api.put("/api/queues/%2F/t", {"durable": False}).status == 201

    publish(node, "/queues/orders", 3)
    qj = api.get("/api/queues/%2F/orders").body
    assert qj["name"] == "orders" and qj["vhost"] == "/" and qj["type"] == "classic" and qj["durable"] is True
    assert qj["arguments"] == {"x-max-length": 10}
    assert (qj["messages"], qj["messages_ready"], qj["messages_unacknowledged"], qj["consumers"]) == (3, 3, 0, 0)
    assert qj["message_stats"]["publish"] == 3 and qj["node"] == "warren@test"
    assert [x["name"] for x in api.get("/api/queues").body] == ["orders", "t"]
    assert [x["name"] for x in api.get("/api/queues/%2F").body] == ["orders", "t"]
    assert api.get("/api/queues/nowhere").status == 404
    assert [b["source"] for b in api.get("/api/queues/%2F/orders/bindings").body] == [""]

    assert api.delete("/api/queues/%2F/orders?if-empty=true").status == 400
    assert api.delete("/api/queues/%2F/orders/contents").status == 204
    assert api.get("/api/queues/%2F/orders").body["messages"] == 0
    assert api.delete("/api/queues/%2F/orders?if-empty=true").status == 204
    assert api.get("/api/queues/%2F/orders").status == 404
    assert api.delete("/api/queues/%2F/orders").status == 404
    assert [x["name"] for x in definitions_file(node)["queues"]] == []


def test_queue_names_are_percent_decoded(api, node):
    name = "odd name/with%chars"
    assert api.put(f"/api/queues/%2F/{q(name)}", {"durable": False}).status == 201
    assert name in node.vhost.queues
    assert api.get(f"/api/queues/%2F/{q(name)}").body["name"] == name


# ---------------------------------------------------------------- exchanges and bindings


def test_exchanges_declare_list_delete(api, node):
    assert api.put("/api/exchanges/%2F/events", {"type": "topic", "durable": True}).status == 201
    assert api.put("/api/exchanges/%2F/events", {"type": "topic"}).status == 204
    assert api.put("/api/exchanges/%2F/events", {"type": "fanout"}).status == 400
    assert api.put("/api/exchanges/%2F/untyped", {}).status == 400
    assert api.put("/api/exchanges/%2F/amq.mine", {"type": "direct"}).status == 400
    assert api.put("/api/exchanges/nowhere/x", {"type": "direct"}).status == 404
    x = api.get("/api/exchanges/%2F/events").body
    assert (x["name"], x["type"], x["durable"], x["internal"]) == ("events", "topic", True, False)
    default = api.get("/api/exchanges/%2F/amq.default").body
    assert default["name"] == "" and default["type"] == "direct"
    names = [x["name"] for x in api.get("/api/exchanges/%2F").body]
    assert names == ["", "amq.direct", "amq.fanout", "amq.headers", "amq.match", "amq.topic", "events"]
    assert len(api.get("/api/exchanges").body) == 7
    assert api.delete("/api/exchanges/%2F/amq.direct").status == 400
    assert api.delete("/api/exchanges/%2F/events").status == 204
    assert api.get("/api/exchanges/%2F/events").status == 404
    assert api.delete("/api/exchanges/%2F/events").status == 404


def test_bindings_route_messages_and_can_be_deleted(api, node):
    api.put("/api/exchanges/%2F/events", {"type": "topic"})
    api.put("/api/exchanges/%2F/fan", {"type": "fanout"})
    api.put("/api/queues/%2F/audit")
    r = api.post("/api/bindings/%2F/e/events/q/audit", {"routing_key": "order.*"})
    assert r.status == 201
    location = r.headers["Location"]
    assert location == "/api/bindings/%2F/e/events/q/audit/order.%2A"
    assert api.post("/api/bindings/%2F/e/fan/e/events", {"routing_key": ""}).status == 201
    b = api.get(location).body
    assert (b["source"], b["destination"], b["destination_type"], b["routing_key"]) == (
        "events", "audit", "queue", "order.*")  # fmt: skip
    assert [x["routing_key"] for x in api.get("/api/bindings/%2F/e/events/q/audit").body] == ["order.*"]
    listed = {(x["source"], x["destination"], x["destination_type"]) for x in api.get("/api/bindings/%2F").body}
    assert listed == {("", "audit", "queue"), ("events", "audit", "queue"), ("fan", "events", "exchange")}
    assert len(api.get("/api/bindings").body) == 3
    assert [x["destination"] for x in api.get("/api/exchanges/%2F/events/bindings/source").body] == ["audit"]
    assert [x["source"] for x in api.get("/api/exchanges/%2F/events/bindings/destination").body] == ["fan"]

    publish(node, "/exchanges/events/order.created", 1)
    publish(node, "/exchanges/fan/order.paid", 1)
    assert api.get("/api/queues/%2F/audit").body["messages"] == 2

    assert api.post("/api/bindings/%2F/e/events/q/missing", {}).status == 404
    assert api.post("/api/bindings/%2F/e/missing/q/audit", {}).status == 404
    assert api.post("/api/bindings/%2F/e/events/q/audit", {"routing_key": 5}).status == 400
    assert api.delete(location).status == 204
    assert api.get(location).status == 404
    assert api.delete(location).status == 404
    assert node.vhost.routing.list_bindings(source="events") == []


# ---------------------------------------------------------------- connections


def test_connections_are_listed_and_closed_with_connection_forced(api, node):
    seen: dict = {}

    def on_open(client):
        [c] = api.get("/api/connections").body
        seen["listed"] = c
        seen["one"] = api.get(f"/api/connections/{q(c['name'])}").body
        seen["vhost"] = api.get("/api/vhosts/%2F/connections").body
        seen["status"] = api.delete(f"/api/connections/{q(c['name'])}", headers={"X-Reason": "maintenance"}).status

    client = ClosedByServer(node.url, on_open)
    client.run()
    c = seen["listed"]
    assert c["protocol"] == "AMQP 1-0" and c["user"] == "guest" and c["vhost"] == "/"
    assert c["peer_host"] == "127.0.0.1" and c["name"].startswith(f"127.0.0.1:{c['peer_port']} -> ")
    assert c["state"] == "running" and c["node"] == "warren@test" and c["port"] == node.port
    assert seen["one"]["name"] == c["name"] and seen["vhost"] == [seen["one"]]
    assert seen["status"] == 204
    assert client.condition == "amqp:connection:forced"
    assert client.description == "maintenance"
    assert api.get(f"/api/connections/{q(c['name'])}").status == 404
    assert api.delete(f"/api/connections/{q(c['name'])}").status == 404


def test_connection_counts_sessions_as_channels(api, node):
    node.declare_queue("q")
    conn = BlockingConnection(node.url, timeout=10)
    receiver = conn.create_receiver("/queues/q", credit=1)
    [c] = api.get("/api/connections").body
    assert c["channels"] >= 1
    totals = api.get("/api/overview").body["object_totals"]
    assert totals["connections"] == 1 and totals["consumers"] == 1 and totals["channels"] == c["channels"]
    assert api.get("/api/queues/%2F/q").body["consumers"] == 1
    receiver.close()
    conn.close()


def test_api_port_zero_binds_a_free_port(node):
    assert node.broker.http_port and node.broker.metrics_port
    assert node.broker.http_port != node.broker.metrics_port
    assert Api(node.broker.http_port).get("/api/whoami").status == 200


def test_a_queue_declared_with_node_lives_on_that_node_or_is_refused(api, node):
    assert api.put("/api/queues/%2F/here", {"node": "warren@test"}).status == 201
    assert api.get("/api/queues/%2F/here").body["node"] == "warren@test"
    reply = api.put("/api/queues/%2F/nowhere", {"node": "elsewhere@nowhere"})
    assert (reply.status, reply.body["reason"]) == (400, "Node elsewhere@nowhere could not be contacted")
    reply = api.put("/api/queues/%2F/qq", {"node": "warren@test", "arguments": {"x-queue-type": "quorum"}})
    assert reply.status == 400 and "x-queue-leader-locator" in reply.body["reason"]
    assert api.get("/api/queues/%2F/nowhere").status == api.get("/api/queues/%2F/qq").status == 404


def test_a_vhost_and_its_bindings_and_permissions_as_rabbitmq_lists_them(api, node):
    assert api.put("/api/vhosts/v", {"tracing": "false"}).status == 201  # rabbitmqadmin's string
    assert "messages" not in api.get("/api/vhosts/v").body  # no queue, no statistics: none, as RabbitMQ
    assert api.put("/api/vhosts/v2", {"tracing": "true"}).status == 400
    api.put("/api/permissions/v/guest", {"configure": ".*", "write": ".*", "read": ".*"})
    assert [(p["vhost"], p["user"]) for p in api.get("/api/permissions").body] == [("/", "guest"), ("v", "guest")]
    for name in ("b", "a"):
        api.put(f"/api/queues/v/{name}")
    api.put("/api/exchanges/v/x", {"type": "topic"})
    for key, queue in (("z", "a"), ("m", "b"), ("a", "b")):
        assert api.post(f"/api/bindings/v/e/x/q/{queue}", {"routing_key": key}).status == 201
    listed = [(b["source"], b["destination"], b["routing_key"]) for b in api.get("/api/bindings/v").body]
    assert listed == [("", "a", "a"), ("", "b", "b"), ("x", "a", "z"), ("x", "b", "a"), ("x", "b", "m")]
    assert api.get("/api/vhosts/v").body["messages"] == 0


def test_a_message_got_shows_the_properties_it_was_published_with(api, node):
    node.declare_queue("p")
    for props in ({}, {"delivery_mode": 1}, {"priority": 7}):
        assert api.post("/api/exchanges/%2F/amq.default/publish", {"routing_key": "p", "payload": "x",
                        "payload_encoding": "string", "properties": props}).body == {"routed": True}  # fmt: skip
    got = api.post("/api/queues/%2F/p/get", {"count": 3, "ackmode": "ack_requeue_false", "encoding": "auto"}).body
    # (a priority travels in the AMQP 1.0 header, which carries durability too: delivery_mode 1 comes
    # with it, where RabbitMQ, keeping AMQP 0-9-1 properties, would show the priority alone)
    assert [m["properties"] for m in got] == [[], {"delivery_mode": 1}, {"delivery_mode": 1, "priority": 7}]
    reply = api.post("/api/queues/%2F/p/get", {"count": 1, "ackmode": "nonsense", "encoding": "auto"})
    assert reply.status == 400 and reply.body["reason"].startswith("Invalid ackmode value: nonsense.")
