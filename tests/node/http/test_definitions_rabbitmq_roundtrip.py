"""Definitions round trip with the real thing: RabbitMQ 3.10 (Debian's
rabbitmq-server, installed by bench/setup.sh and run as a private node by
bench/rabbitmq.py) exports its definitions, Warren imports them, Warren
exports, RabbitMQ imports that; every user logs in on both, and every object
is there on both. This is the way back from Warren to RabbitMQ."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import urllib.error
import urllib.request

import pytest
from mgmt_client import Api
from rabbit_setup import rabbit_node_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def rabbit():
    RabbitNode = rabbit_node_class()
    node = RabbitNode(amqp_port=free_port(), mgmt_port=free_port(), dist_port=free_port(),
                      nodename=f"warren_defs_{os.getpid()}@localhost")  # fmt: skip
    with node:
        yield node


def sha512_hash(password: str) -> str:
    salt = os.urandom(4)
    return base64.b64encode(salt + hashlib.sha512(salt + password.encode()).digest()).decode()


USERS = {"guest": "guest", "alice": "alice-pw", "bob": "bob-pw"}


def logs_in(port: int, user: str, password: str) -> bool:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/whoami")
    req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())["name"] == user
    except urllib.error.HTTPError:
        return False


def populate(r) -> None:
    api = r.api
    api("PUT", "/api/vhosts/shop", {"description": "the shop", "tags": "eu"})
    api("PUT", "/api/users/alice", {"password": "alice-pw", "tags": "administrator"})
    api("PUT", "/api/users/bob", {"password_hash": sha512_hash("bob-pw"),
                                  "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": "management"})
    api("PUT", "/api/permissions/shop/alice", {"configure": ".*", "write": ".*", "read": ".*"})
    api("PUT", "/api/permissions/shop/bob", {"configure": "", "write": "^shop", "read": ".*"})
    api("PUT", "/api/topic-permissions/shop/alice", {"exchange": "shop.x", "write": "^o\\.", "read": ".*"})
    api("PUT", "/api/vhost-limits/shop/max-connections", {"value": 10})
    api("PUT", "/api/vhost-limits/shop/max-queues", {"value": 50})
    api("PUT", "/api/user-limits/alice/max-connections", {"value": 5})
    api("PUT", "/api/policies/shop/cap", {"pattern": "^orders$", "definition": {"max-length": 100},
                                          "apply-to": "queues"})
    api("PUT", "/api/operator-policies/shop/op", {"pattern": ".*", "definition": {"max-length": 1000},
                                                  "apply-to": "queues", "priority": 1})
    api("PUT", "/api/queues/shop/orders", {"durable": True})
    api("PUT", "/api/queues/shop/qq", {"durable": True, "arguments": {"x-queue-type": "quorum",
                                                                      "x-delivery-limit": 5}})
    api("PUT", "/api/exchanges/shop/shop.x", {"type": "topic", "durable": True})
    api("POST", "/api/bindings/shop/e/shop.x/q/orders", {"routing_key": "o.#"})
    api("POST", "/api/bindings/shop/e/shop.x/q/qq", {"routing_key": "q.*", "arguments": {"k": "v"}})
    api("PUT", "/api/global-parameters/cluster_name", {"name": "cluster_name", "value": "old-rabbit"})


def objects(doc: dict) -> dict:
    """What a definitions document holds, whatever the exporter's layout."""

    def j(value) -> str:
        return json.dumps(value, sort_keys=True)

    def tags(value) -> list:
        return sorted(value.split(",") if isinstance(value, str) else value)

    return {
        "users": {u["name"]: (u["password_hash"], u["hashing_algorithm"], tags(u["tags"]), u.get("limits") or {})
                  for u in doc["users"]},
        "vhosts": {v["name"] for v in doc["vhosts"]},
        "permissions": {(p["user"], p["vhost"], p["configure"], p["write"], p["read"]) for p in doc["permissions"]},
        "topic_permissions": {(t["user"], t["vhost"], t["exchange"], t["write"], t["read"])
                              for t in doc["topic_permissions"]},
        "parameters": {(p["vhost"], p["component"], p["name"]): j(p["value"]) for p in doc["parameters"]},
        "global_parameters": {g["name"]: g["value"] for g in doc["global_parameters"]},
        "policies": {(p["vhost"], p["name"]): (p["pattern"], p["apply-to"], j(p["definition"]), p["priority"])
                     for p in doc["policies"]},
        "queues": {(q["vhost"], q["name"]): (q["durable"], q["auto_delete"], j(q["arguments"])) for q in doc["queues"]},
        "exchanges": {(x["vhost"], x["name"]): (x["type"], x["durable"], x["auto_delete"], x["internal"],
                                                j(x["arguments"])) for x in doc["exchanges"]},
        "bindings": {(b["vhost"], b["source"], b["destination_type"], b["destination"], b["routing_key"],
                      j(b["arguments"])) for b in doc["bindings"]},
    }  # fmt: skip


def test_rabbitmq_to_warren_and_back(rabbit, broker_factory):
    populate(rabbit)
    from_rabbit = rabbit.api("GET", "/api/definitions")
    want = objects(from_rabbit)
    assert len(want["parameters"]) == 2 and "cluster_name" in want["global_parameters"]  # the test covers them

    # a node that hashes new passwords as RabbitMQ does, so that users made on it log in there too
    node = broker_factory(http_port=0, metrics_port=0, password_hashing_module="rabbit_password_hashing_sha256")
    api = Api(node.broker.http_port)
    reply = api.post("/api/definitions", from_rabbit)
    assert reply.status == 204, reply.body
    assert api.put("/api/users/dave", {"password": "dave-pw", "tags": "management"}).status == 201
    assert api.put("/api/permissions/shop/dave", {"configure": "", "write": "", "read": ".*"}).status == 201
    assert {user: logs_in(node.broker.http_port, user, pw) for user, pw in USERS.items()} == dict.fromkeys(USERS, True)
    from_warren = api.get("/api/definitions").body
    dave = next(u for u in from_warren["users"] if u["name"] == "dave")
    assert dave["hashing_algorithm"] == "rabbit_password_hashing_sha256"
    got = objects(from_warren)
    del got["users"]["dave"]
    got["permissions"].remove(("dave", "shop", "", "", ".*"))
    assert got == want
    assert api.get("/api/queues/shop/qq").body["type"] == "quorum"
    assert api.post("/api/definitions", from_rabbit).status == 204  # again: nothing changes
    assert api.get("/api/definitions").body == from_warren

    # back to RabbitMQ: what Warren exported replaces what was there
    rabbit.api("DELETE", "/api/vhosts/shop")
    for user in ("alice", "bob"):
        rabbit.api("DELETE", f"/api/users/{user}")
    rabbit.api("PUT", "/api/global-parameters/cluster_name", {"name": "cluster_name", "value": "someone-else"})
    rabbit.api("POST", "/api/definitions", from_warren)
    assert objects(rabbit.api("GET", "/api/definitions")) == objects(from_warren)
    users = {**USERS, "dave": "dave-pw"}
    assert {user: logs_in(rabbit.mgmt_port, user, pw) for user, pw in users.items()} == dict.fromkeys(users, True)
