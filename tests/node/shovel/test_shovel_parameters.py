"""The `shovel` runtime parameter: stored in the metadata through
/api/parameters/shovel, checked key by key (a bad one is a 400 naming it),
exported and imported with the definitions."""

from __future__ import annotations

import pytest

from node.shovel import definition

GOOD = {"src-protocol": "local", "src-uri": "amqp://", "src-queue": "from",
        "dest-protocol": "amqp10", "dest-uri": "amqp://bob:secret@rabbit.example:5672", "dest-address": "/queue/to",
        "ack-mode": "on-publish", "src-delete-after": "queue-length", "src-prefetch-count": 50,
        "reconnect-delay": 1, "dest-add-forward-headers": True}  # fmt: skip


def test_put_get_list_delete(api):
    r = api.put("/api/parameters/shovel/%2F/move", {"value": GOOD})
    assert r.status == 201, r.body
    assert api.put("/api/parameters/shovel/%2F/move", {"value": {**GOOD, "ack-mode": "no-ack"}}).status == 204
    got = api.get("/api/parameters/shovel/%2F/move").body
    assert got == {"vhost": "/", "component": "shovel", "name": "move", "value": {**GOOD, "ack-mode": "no-ack"}}
    assert [p["name"] for p in api.get("/api/parameters/shovel").body] == ["move"]
    assert [p["component"] for p in api.get("/api/parameters").body] == ["shovel"]
    assert api.delete("/api/parameters/shovel/%2F/move").status == 204
    assert api.get("/api/parameters/shovel/%2F/move").status == 404
    assert api.put("/api/parameters/shovel/nope/move", {"value": GOOD}).status == 404


@pytest.mark.parametrize("change, named", [
    ({"src-exchange": "x"}, "src-exchange"),
    ({"dest-exchange-key": "k"}, "dest-exchange-key"),
    ({"src-predeclared": True}, "src-predeclared"),
    ({"ack-mode": "sometimes"}, "ack-mode"),
    ({"src-prefetch-count": 0}, "src-prefetch-count"),
    ({"src-delete-after": -1}, "src-delete-after"),
    ({"src-delete-after": 5, "ack-mode": "no-ack"}, "src-delete-after"),
    ({"reconnect-delay": "soon"}, "reconnect-delay"),
    ({"dest-add-forward-headers": "yes"}, "dest-add-forward-headers"),
    ({"src-protocol": "amqp091"}, "src-protocol"),
    ({"dest-uri": "http://rabbit"}, "dest-uri"),
    ({"dest-uri": "amqp://rabbit?heartbeat=5"}, "dest-uri"),
    ({"src-uri": "amqp://elsewhere"}, "src-uri"),
    ({"dest-queue": "q"}, "dest-queue"),
])  # fmt: skip
def test_a_bad_key_is_refused_naming_it(api, change, named):
    r = api.put("/api/parameters/shovel/%2F/bad", {"value": {**GOOD, **change}})
    assert r.status == 400 and named in r.body["reason"], r.body
    assert api.get("/api/parameters/shovel/%2F/bad").status == 404


@pytest.mark.parametrize("missing", ["src-protocol", "src-uri", "src-queue", "dest-address", "dest-protocol"])
def test_a_missing_key_is_refused_naming_it(api, missing):
    value = {k: v for k, v in GOOD.items() if k != missing}
    r = api.put("/api/parameters/shovel/%2F/bad", {"value": value})
    assert r.status == 400 and missing in r.body["reason"], r.body


def test_queue_length_is_for_local_sources_only():
    amqp10 = {**GOOD, "src-protocol": "amqp10", "src-address": "/amq/queue/q", "src-uri": "amqp://h"}
    del amqp10["src-queue"]
    with pytest.raises(definition.DefinitionError, match="queue-length"):
        definition.parse(amqp10)
    assert definition.parse({**amqp10, "src-delete-after": 10}).delete_after == 10


def test_uris_are_masked():
    assert definition.mask_uri("amqp://bob:secret@h:5672/v") == "amqp://bob@h:5672/v"
    assert definition.mask_uri("amqp://h") == "amqp://h"


def test_definitions_carry_shovels(api):
    assert api.put("/api/parameters/shovel/%2F/move", {"value": GOOD}).status == 201
    doc = api.get("/api/definitions").body
    assert [p for p in doc["parameters"] if p["component"] == "shovel"] == [
        {"vhost": "/", "component": "shovel", "name": "move", "value": GOOD}]  # fmt: skip
    assert api.delete("/api/parameters/shovel/%2F/move").status == 204
    assert api.post("/api/definitions", doc).status == 204
    assert api.get("/api/parameters/shovel/%2F/move").body["value"] == GOOD
    bad = {**doc, "parameters": [{"vhost": "/", "component": "shovel", "name": "b", "value": {**GOOD, "x": 1}}]}
    r = api.post("/api/definitions", bad)
    assert r.status == 400 and "'x'" in r.body["reason"], r.body


def test_a_migration_builds_its_value_through_the_python_api(api):
    value = definition.amqp10_to_local("amqp://u:p@rabbit:5672", "/amq/queue/orders", "orders", delete_after=10)
    assert definition.parse(value).source.address == "/amq/queue/orders"
    assert api.put("/api/parameters/shovel/%2F/migrate-orders", {"value": value}).status == 201
    with pytest.raises(definition.DefinitionError, match="ack-mode"):
        definition.amqp10_to_local("amqp://rabbit", "/amq/queue/q", "q", ack_mode="later")


def test_a_bad_name_or_an_oversized_value_is_refused(api):
    r = api.put("/api/parameters/shovel/%2F/" + "n" * 300, {"value": GOOD})
    assert r.status == 400 and "255" in r.body["reason"], r.body
    big = {**GOOD, "src-uri": ["amqp://"] * 10000}
    r = api.put("/api/parameters/shovel/%2F/big", {"value": big})
    assert r.status == 400 and "bytes" in r.body["reason"], r.body
