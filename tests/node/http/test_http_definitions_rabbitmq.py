"""Definitions in RabbitMQ 4.2's shape, both ways: vhost limits and operator
policies as `parameters`, `global_parameters`, a vhost's default queue type
and a user's limits are imported and exported back; a component or global
parameter Warren does not implement, an unknown key or a missing feature flag
is a 400 naming it, with nothing applied; importing twice changes nothing."""

from __future__ import annotations

import json

import pytest
from mgmt_client import Api

from node.broker import Broker
from node.config import Config
from node.vhosts.definitions_check import INFORMATIONAL

pytestmark = pytest.mark.timeout(60)


def rabbitmq_42_export() -> dict:
    return {
        "rabbit_version": "4.2.0", "rabbitmq_version": "4.2.0", "product_name": "RabbitMQ",
        "product_version": "4.2.0", "rabbitmq_definition_format": "cluster", "original_cluster_name": "rabbit@old",
        "explanation": "Definitions of cluster 'rabbit@old'",
        "users": [{"name": "ops", "password_hash": "", "hashing_algorithm": "rabbit_password_hashing_sha256",
                   "tags": ["monitoring"], "limits": {"max-connections": 5}}],
        "vhosts": [{"name": "shop", "limits": {"max-queues": 10, "max-connections": 3},
                    "metadata": {"description": "the shop", "tags": ["eu"], "default_queue_type": "quorum"}}],
        "permissions": [], "topic_permissions": [],
        "parameters": [
            {"vhost": "shop", "component": "vhost-limits", "name": "limits",
             "value": {"max-queues": 10, "max-connections": 3}},
            {"vhost": "shop", "component": "operator_policy", "name": "cap",
             "value": {"pattern": ".*", "definition": {"max-length": 1000}, "priority": 1, "apply-to": "queues"}},
        ],
        "global_parameters": [{"name": "cluster_name", "value": "rabbit@old"},
                              {"name": "internal_cluster_id", "value": "rabbitmq-cluster-id-abc"}],
        "policies": [], "exchanges": [], "bindings": [],
        "queues": [{"vhost": "shop", "name": "orders", "type": "quorum", "durable": True, "auto_delete": False,
                    "arguments": {"x-queue-type": "quorum"}}],
    }  # fmt: skip


def effects_of(node, action) -> list:
    """The metadata effects `action()` caused on `node`."""
    seen: list = []
    node.call(node.broker.metadata_machine.subscribe, lambda cmd, result, effects, index: seen.extend(effects),
              lambda state: None)  # fmt: skip
    action()
    return seen


def test_imported_exported_and_imported_again_without_a_change(api, node):
    doc = rabbitmq_42_export()
    assert api.post("/api/definitions", doc).status == 204
    assert api.get("/api/vhost-limits/shop").body == [{"vhost": "shop", "value": {"max-connections": 3,
                                                                                   "max-queues": 10}}]  # fmt: skip
    assert api.get("/api/user-limits/ops").body == [{"user": "ops", "value": {"max-connections": 5}}]
    assert api.get("/api/vhosts/shop").body["default_queue_type"] == "quorum"
    assert api.get("/api/operator-policies/shop/cap").body["definition"] == {"max-length": 1000}
    assert api.get("/api/queues/shop/orders").body["type"] == "quorum"
    assert api.get("/api/overview").body["cluster_name"] == "rabbit@old"

    out = api.get("/api/definitions").body
    assert out["rabbit_version"] == out["rabbitmq_version"] == "4.2.0" and out["product_name"] == "Warren"
    assert "version" not in out and "operator_policies" not in out  # RabbitMQ keeps those in parameters
    assert sorted(out["parameters"], key=lambda p: p["component"]) == doc["parameters"][::-1]
    assert out["global_parameters"] == doc["global_parameters"]
    assert {"name": "ops", "limits": {"max-connections": 5}, "tags": ["monitoring"]}.items() <= {
        k: v for u in out["users"] if u["name"] == "ops" for k, v in u.items()}.items()  # fmt: skip
    shop = next(v for v in out["vhosts"] if v["name"] == "shop")
    assert shop["metadata"] == doc["vhosts"][0]["metadata"] and shop["limits"] == {"max-connections": 3,
                                                                                   "max-queues": 10}  # fmt: skip
    assert next(q for q in out["queues"] if q["name"] == "orders")["type"] == "quorum"

    assert effects_of(node, lambda: api.post("/api/definitions", doc)) == []  # the same file again
    assert effects_of(node, lambda: api.post("/api/definitions", out)) == []  # our own export of it
    assert api.get("/api/definitions").body == out


def test_a_vhost_limits_parameter_replaces_the_vhosts_limits(api, node):
    assert api.put("/api/vhost-limits/%2F/max-connections", {"value": 7}).status == 204
    doc = {"parameters": [{"vhost": "/", "component": "vhost-limits", "name": "limits", "value": {"max-queues": 4}}]}
    assert api.post("/api/definitions", doc).status == 204
    assert api.get("/api/vhost-limits/%2F").body == [{"vhost": "/", "value": {"max-queues": 4}}]
    vhost_doc = api.get("/api/definitions/%2F").body
    assert vhost_doc["parameters"] == [{"component": "vhost-limits", "name": "limits", "value": {"max-queues": 4}}]
    assert api.put("/api/vhosts/other", {}).status == 201
    assert api.post("/api/definitions/other", vhost_doc).status == 204
    assert api.get("/api/vhost-limits/other").body == [{"vhost": "other", "value": {"max-queues": 4}}]


@pytest.mark.parametrize("change, named", [
    (lambda d: d["parameters"].append({"vhost": "shop", "component": "shovel", "name": "move-orders",
                                       "value": {"src-uri": "amqp://", "src-queue": "a"}}), ["shovel", "move-orders"]),
    (lambda d: d["parameters"].append({"vhost": "shop", "component": "federation-upstream", "name": "up",
                                       "value": {"uri": "amqp://"}}), ["federation-upstream", "up"]),
    (lambda d: d["global_parameters"].append({"name": "cluster_tags", "value": []}), ["cluster_tags"]),
    (lambda d: d.update(extra_things=[]), ["extra_things"]),
    (lambda d: d["vhosts"][0]["metadata"].update(default_queue_type="lazy"), ["lazy"]),
    (lambda d: d["vhosts"][0].update(tracing=True), ["tracing"]),
    (lambda d: d["users"][0]["limits"].update({"max-channels": 10}), ["max-channels", "ops"]),
    (lambda d: d["parameters"][0]["value"].update({"max-widgets": 1}), ["max-widgets", "limits"]),
])  # fmt: skip
def test_what_warren_would_drop_is_refused_naming_it(api, node, change, named):
    doc = rabbitmq_42_export()
    change(doc)
    reply = api.post("/api/definitions", doc)
    assert reply.status == 400 and all(n in reply.body["reason"] for n in named), reply.body
    assert api.get("/api/vhosts/shop").status == 404 and api.get("/api/users/ops").status == 404


def test_informational_keys_are_accepted(api, node):
    assert api.post("/api/definitions", {key: "x" for key in INFORMATIONAL}).status == 204


def test_refused_naming_the_flag_while_it_is_off(broker_factory, monkeypatch):
    flags = ("global_parameters", "vhost_default_queue_type")
    monkeypatch.setenv("WARREN_TEST_UNSUPPORTED_FLAGS", ",".join(flags))
    api = Api(broker_factory(http_port=0, metrics_port=0, enable_test_faults=True).broker.http_port)
    doc = rabbitmq_42_export()
    reply = api.post("/api/definitions", doc)
    assert reply.status == 400 and "global_parameters" in reply.body["reason"]
    doc["global_parameters"] = []
    reply = api.post("/api/definitions", doc)
    assert reply.status == 400 and "vhost_default_queue_type" in reply.body["reason"]
    assert api.get("/api/vhosts/shop").status == 404
    del doc["vhosts"][0]["metadata"]["default_queue_type"]
    assert api.post("/api/definitions", doc).status == 204  # the rest needs no new flag


def test_loaded_from_the_definitions_file_at_start(broker_factory, tmp_path):
    path = tmp_path / "defs.json"
    path.write_text(json.dumps(rabbitmq_42_export()))
    api = Api(broker_factory(http_port=0, metrics_port=0, definitions_file=str(path)).broker.http_port)
    assert api.get("/api/vhost-limits/shop").body[0]["value"] == {"max-connections": 3, "max-queues": 10}
    assert api.get("/api/vhosts/shop").body["default_queue_type"] == "quorum"
    assert api.get("/api/overview").body["cluster_name"] == "rabbit@old"


def test_new_passwords_hashed_as_rabbitmq_does_when_asked(broker_factory, tmp_path):
    api = Api(broker_factory(http_port=0, metrics_port=0,
                             password_hashing_module="rabbit_password_hashing_sha512").broker.http_port)  # fmt: skip
    assert api.put("/api/users/carol", {"password": "pw", "tags": "management"}).status == 201
    assert api.get("/api/users/carol").body["hashing_algorithm"] == "rabbit_password_hashing_sha512"
    assert api.as_user("carol", "pw").get("/api/whoami").status == 200
    exported = {u["name"]: u for u in api.get("/api/definitions").body["users"]}
    assert exported["guest"]["hashing_algorithm"] == "rabbit_password_hashing_sha512"  # the default user too
    with pytest.raises(ValueError, match="password_hashing_module"):
        Broker(Config(data_dir=str(tmp_path / "bad"), password_hashing_module="rabbit_password_hashing_md5"))


def test_cluster_name_is_the_global_parameter(api, node):
    assert api.get("/api/cluster-name").body == {"name": "warren@test"}  # the node's name until one is set
    assert api.put("/api/cluster-name", {"name": ""}).status == 400
    assert api.put("/api/cluster-name", {"name": "blue"}).status == 204
    assert api.get("/api/cluster-name").body == {"name": "blue"} and api.get("/api/overview").body["cluster_name"] == "blue"
    exported = {g["name"]: g["value"] for g in api.get("/api/definitions").body["global_parameters"]}
    # with the permanent id a new cluster seeds, as RabbitMQ's export has it
    assert exported["cluster_name"] == "blue" and exported["internal_cluster_id"].startswith("rabbitmq-cluster-id-")


def test_the_cluster_name_setting_is_set_at_every_start(broker_factory, tmp_path):
    """RabbitMQ's `cluster_name` setting: the configured name wins at each boot
    over one set at run time; without it the node's name stays the default."""
    data = tmp_path / "named"
    first = broker_factory(data, cluster_name="east")
    api = Api(first.broker.http_port)
    assert api.get("/api/cluster-name").body == {"name": "east"}
    assert api.put("/api/cluster-name", {"name": "west"}).status == 204
    first.stop()
    again = Api(broker_factory(data, cluster_name="east").broker.http_port)
    assert again.get("/api/cluster-name").body == {"name": "east"}
