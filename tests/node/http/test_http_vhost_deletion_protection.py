"""A vhost's protection from deletion (RabbitMQ 4.1,
/api/vhosts/{vhost}/deletion/protection): POST protects it, DELETE lifts it,
administrators only; a protected vhost's DELETE is refused with 412 as
RabbitMQ's; the field shows in /api/vhosts and round-trips through
definitions; refused naming the feature flag while it is off."""

from __future__ import annotations

import pytest
from mgmt_client import Api

pytestmark = pytest.mark.timeout(60)

FLAG = "vhost_deletion_protection"
PROTECTION = "/api/vhosts/v1/deletion/protection"


def test_a_protected_vhost_is_not_deleted_until_the_protection_is_lifted(api):
    assert api.put("/api/vhosts/v1", {"description": "keep"}).status == 201
    assert api.get(PROTECTION).body == {"name": "v1", "protected_from_deletion": False}
    assert api.post(PROTECTION).status == 204
    assert api.get(PROTECTION).body == {"name": "v1", "protected_from_deletion": True}
    vhost = api.get("/api/vhosts/v1").body
    assert vhost["protected_from_deletion"] is True and vhost["metadata"]["protected_from_deletion"] is True
    reply = api.delete("/api/vhosts/v1")
    assert reply.status == 412 and reply.body == {
        "error": "precondition_failed",
        "reason": "Refusing to delete virtual host 'v1' because it is protected from deletion",
    }
    # an update of the vhost keeps it
    assert api.put("/api/vhosts/v1", {"description": "changed"}).status == 204
    assert api.delete("/api/vhosts/v1").status == 412
    assert api.get("/api/vhosts/v1").body["description"] == "changed"
    assert api.delete(PROTECTION).status == 204
    assert api.get("/api/vhosts/v1").body["protected_from_deletion"] is False
    assert api.delete("/api/vhosts/v1").status == 204
    assert api.get("/api/vhosts/v1").status == 404


def test_unknown_vhosts_and_non_administrators(api):
    assert api.post("/api/vhosts/nope/deletion/protection").status == 404
    assert api.delete("/api/vhosts/nope/deletion/protection").status == 404
    assert api.put("/api/users/mon", {"password": "p", "tags": "monitoring"}).status == 201
    assert api.put("/api/vhosts/v1").status == 201
    monitor = api.as_user("mon", "p")
    assert monitor.post(PROTECTION).status == 401
    assert api.get(PROTECTION).body["protected_from_deletion"] is False


def test_protection_round_trips_through_definitions(api):
    assert api.put("/api/vhosts/v1").status == 201
    assert api.post(PROTECTION).status == 204
    doc = api.get("/api/definitions").body
    (entry,) = [v for v in doc["vhosts"] if v["name"] == "v1"]
    assert entry["metadata"]["protected_from_deletion"] is True
    # lifted by a document that says so, set again by the exported one
    entry["metadata"]["protected_from_deletion"] = False
    assert api.post("/api/definitions", doc).status in (200, 201, 204)
    assert api.get(PROTECTION).body["protected_from_deletion"] is False
    entry["metadata"]["protected_from_deletion"] = True
    assert api.post("/api/definitions", doc).status in (200, 201, 204)
    assert api.get(PROTECTION).body["protected_from_deletion"] is True
    entry["metadata"]["protected_from_deletion"] = "yes"
    reply = api.post("/api/definitions", doc)
    assert reply.status == 400 and "protected_from_deletion" in reply.body["reason"]


def test_refused_naming_the_flag_while_it_is_off(broker_factory, monkeypatch):
    monkeypatch.setenv("WARREN_TEST_UNSUPPORTED_FLAGS", FLAG)
    node = broker_factory(http_port=0, metrics_port=0, enable_test_faults=True)
    assert FLAG not in node.broker.projections.feature_flags
    api = Api(node.broker.http_port)
    assert api.put("/api/vhosts/v1").status == 201
    reply = api.post(PROTECTION)
    assert reply.status == 400 and FLAG in reply.body["reason"]
    assert api.delete("/api/vhosts/v1").status == 204


def test_put_accepts_the_current_value_back_and_refuses_another(api):
    assert api.put("/api/vhosts/v1").status == 201
    assert api.post(PROTECTION).status == 204
    body = api.get("/api/vhosts/v1").body
    assert api.put("/api/vhosts/v1", body).status == 204  # a GET's body put back
    reply = api.put("/api/vhosts/v1", {"protected_from_deletion": False})
    assert reply.status == 400 and "/api/vhosts/v1/deletion/protection" in reply.body["reason"]
    assert api.get(PROTECTION).body["protected_from_deletion"] is True
    assert api.put("/api/vhosts/v2", {"protected_from_deletion": True}).status == 400
    assert api.get("/api/vhosts/v2").status == 404
