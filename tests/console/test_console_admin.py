"""The console's Admin page (node/http/console/pages/admin.js and admin/*.js)
in headless Chromium against a real node: users, virtual hosts with limits,
permissions, topic permissions, policies and operator policies made and
removed from the page, each checked through the HTTP API; a monitoring user
gets the page read-only, with the API's refusal shown where it refuses."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_create_retag_and_delete_a_user(console, api):
    console.go("#/admin/users")
    create = console.test_id("user-create")
    create.get_by_label("Username").fill("alice")
    create.get_by_label("Password").fill("s3cret")
    create.get_by_label("Tags").fill("monitoring")
    console.test_id("user-create-submit").click()
    row = console.test_id("user-alice")
    expect(row).to_be_visible()
    assert api.get("/api/users/alice").body["tags"] == ["monitoring"]
    assert api.as_user("alice", "s3cret").get("/api/whoami").body == {"name": "alice", "tags": ["monitoring"]}

    row.get_by_label("Tags of alice").fill("management, policymaker")
    row.locator('[data-test="user-tags-submit"]').click()
    expect(console.test_id("toast").last).to_contain_text("Tags of alice set")
    assert api.get("/api/users/alice").body["tags"] == ["management", "policymaker"]
    assert api.as_user("alice", "s3cret").get("/api/whoami").status == 200  # the password was kept

    console.test_id("user-limit-user").select_option("alice")
    console.test_id("user-limit-value").fill("2")
    console.test_id("user-limit-submit").click()
    expect(console.test_id("user-alice").locator('[data-test="user-max-connections"]')).to_have_text("2")
    assert api.get("/api/user-limits/alice").body == [{"user": "alice", "value": {"max-connections": 2}}]
    console.test_id("user-limit-user").select_option("alice")  # an empty value clears it
    console.test_id("user-limit-submit").click()
    expect(console.test_id("user-alice").locator('[data-test="user-max-connections"]')).to_have_text("—")
    assert api.get("/api/user-limits/alice").body == []

    console.test_id("user-alice").locator('[data-test="user-delete"]').click()  # the fixture accepts confirm()
    expect(console.test_id("user-alice")).to_have_count(0)
    assert api.get("/api/users/alice").status == 404


def test_a_refused_permission_shows_the_apis_reason(console, api, node):
    node.add_user("bob", "pw", ("management",))
    console.go("#/admin/permissions")
    form = console.test_id("permission-set")
    form.get_by_label("User").select_option("bob")
    form.get_by_label("Configure regexp").fill("(unclosed")
    console.test_id("permission-set-submit").click()
    expect(console.test_id("permission-set-error")).to_be_visible()
    reply = api.put("/api/permissions/%2F/bob", {"configure": "(unclosed", "write": ".*", "read": ".*"})
    assert reply.status == 400
    expect(console.test_id("permission-set-error")).to_have_text(reply.body["reason"])  # word for word
    expect(form.get_by_label("Configure regexp")).to_have_value("(unclosed")  # kept for correcting
    assert api.get("/api/permissions/%2F/bob").status == 404


def test_create_and_delete_a_vhost_with_its_queue_type_and_limits(console, api):
    console.go("#/admin/vhosts")
    create = console.test_id("vhost-create")
    create.get_by_label("Name", exact=True).fill("shop")
    create.get_by_label("Description").fill("the shop")
    create.get_by_label("Tags").fill("retail, eu")
    create.get_by_label("Default queue type").select_option("quorum")
    create.get_by_label("Max connections").fill("5")
    create.get_by_label("Max queues").fill("10")
    console.test_id("vhost-create-submit").click()
    row = console.test_id("vhost-shop")
    expect(row.locator('[data-test="vhost-max-queues"]')).to_have_text("10")
    body = api.get("/api/vhosts/shop").body
    assert (body["description"], body["tags"], body["default_queue_type"]) == ("the shop", ["retail", "eu"], "quorum")
    expect(row.locator('[data-test="vhost-tags"]')).to_have_text("retail, eu")
    assert api.get("/api/vhost-limits/shop").body == [{"vhost": "shop", "value": {"max-connections": 5,
                                                                                  "max-queues": 10}}]  # fmt: skip

    # an empty value clears the limit
    console.test_id("vhost-limit-vhost").select_option("shop")
    console.test_id("vhost-limit-limit").select_option("max-queues")
    console.test_id("vhost-limit-submit").click()
    expect(console.test_id("vhost-shop").locator('[data-test="vhost-max-queues"]')).to_have_text("—")
    assert api.get("/api/vhost-limits/shop").body == [{"vhost": "shop", "value": {"max-connections": 5}}]

    console.test_id("vhost-shop").locator('[data-test="vhost-delete"]').click()
    expect(console.test_id("vhost-shop")).to_have_count(0)
    assert api.get("/api/vhosts/shop").status == 404


def test_set_and_clear_a_permission_and_a_topic_permission(console, api, node):
    node.add_user("carol", "pw", ("management",))
    node.add_vhost("shop")
    console.go("#/admin/permissions")
    form = console.test_id("permission-set")
    form.get_by_label("User").select_option("carol")
    form.get_by_label("Virtual host").select_option("shop")
    form.get_by_label("Configure regexp").fill("^carol\\.")
    form.get_by_label("Read regexp").fill("^(carol|shared)\\.")
    console.test_id("permission-set-submit").click()
    row = console.test_id("permission-carol-shop")
    expect(row.locator('[data-test="permission-configure"]')).to_have_text("^carol\\.")
    assert api.get("/api/permissions/shop/carol").body == {"user": "carol", "vhost": "shop", "configure": "^carol\\.",
                                                           "write": ".*", "read": "^(carol|shared)\\."}  # fmt: skip
    # the permission is real: carol may now declare her own queue in shop, and no other
    carol = api.as_user("carol", "pw")
    assert carol.put("/api/queues/shop/carol.q", {"durable": True}).status == 201
    assert carol.put("/api/queues/shop/other.q", {"durable": True}).status == 401

    console.go("#/admin/topic-permissions")
    form = console.test_id("topic-permission-set")
    form.get_by_label("User").select_option("carol")
    form.get_by_label("Virtual host").select_option("shop")
    form.get_by_label("Write regexp").fill("^eu\\.")
    console.test_id("topic-permission-set-submit").click()
    topic_row = console.test_id("topic-permission-carol-shop-amq.topic")
    expect(topic_row.locator('[data-test="topic-permission-write"]')).to_have_text("^eu\\.")
    assert api.get("/api/topic-permissions/shop/carol").body == [
        {"user": "carol", "vhost": "shop", "exchange": "amq.topic", "write": "^eu\\.", "read": ".*"}
    ]
    topic_row.locator('[data-test="topic-permission-delete"]').click()
    expect(topic_row).to_have_count(0)
    assert api.get("/api/topic-permissions/shop/carol").status == 404

    console.go("#/admin/permissions")
    console.test_id("permission-carol-shop").locator('[data-test="permission-delete"]').click()
    expect(console.test_id("permission-carol-shop")).to_have_count(0)
    assert api.get("/api/permissions/shop/carol").status == 404


def test_a_policy_made_on_the_page_applies_to_a_queue(console, api):
    assert api.put("/api/queues/%2F/orders.1", {"durable": True}).status == 201
    console.go("#/admin/policies")
    form = console.test_id("policy-create")
    form.get_by_label("Name", exact=True).fill("cap")
    form.get_by_label("Pattern").fill("^orders\\.")
    form.get_by_label("Apply to").select_option("queues")
    form.get_by_label("Priority").fill("3")
    form.get_by_label("Definition (JSON)").fill('{"max-length": "lots"}')
    console.test_id("policy-create-submit").click()
    # the API's own reason for the bad definition, and nothing made
    expect(console.test_id("policy-create-error")).to_contain_text("'max-length' must be a non-negative integer")
    assert api.get("/api/policies/%2F/cap").status == 404
    form.get_by_label("Definition (JSON)").fill("{not json")
    console.test_id("policy-create-submit").click()
    expect(console.test_id("policy-create-error")).to_contain_text("Definition is not valid JSON")

    form.get_by_label("Definition (JSON)").fill('{"max-length": 5}')
    console.test_id("policy-create-submit").click()
    expect(console.test_id("policy-/-cap").locator('[data-test="policy-definition"]')).to_have_text('{"max-length":5}')
    assert api.get("/api/policies/%2F/cap").body == {"vhost": "/", "name": "cap", "pattern": "^orders\\.",
                                                     "apply-to": "queues", "definition": {"max-length": 5},
                                                     "priority": 3}  # fmt: skip
    queue = api.get("/api/queues/%2F/orders.1").body
    assert queue["policy"] == "cap" and queue["effective_policy_definition"] == {"max-length": 5}

    console.go("#/admin/operator-policies")
    form = console.test_id("operator-policy-create")
    form.get_by_label("Name", exact=True).fill("ceiling")
    form.get_by_label("Pattern").fill("^orders\\.")
    form.get_by_label("Definition (JSON)").fill('{"max-length": 2}')
    console.test_id("operator-policy-create-submit").click()
    expect(console.test_id("operator-policy-/-ceiling")).to_be_visible()
    queue = api.get("/api/queues/%2F/orders.1").body
    assert queue["operator_policy"] == "ceiling" and queue["effective_policy_definition"]["max-length"] == 2

    console.test_id("operator-policy-/-ceiling").locator('[data-test="operator-policy-delete"]').click()
    expect(console.test_id("operator-policy-/-ceiling")).to_have_count(0)
    console.go("#/admin/policies")
    console.test_id("policy-/-cap").locator('[data-test="policy-delete"]').click()
    expect(console.test_id("policy-/-cap")).to_have_count(0)
    assert api.get("/api/queues/%2F/orders.1").body.get("policy") in (None, "")


def test_a_monitoring_user_gets_admin_read_only_and_the_apis_refusals(open_console, node, api):
    node.add_user("watcher", "pw", ("monitoring",))
    console = open_console("watcher", "pw")
    console.go("#/admin/users")
    expect(console.test_id("admin-read-only")).to_contain_text("needs the administrator tag")
    expect(console.test_id("admin-error")).to_have_text("Not administrator user")  # GET /api/users refused
    expect(console.test_id("user-create")).to_have_count(0)

    console.go("#/admin/vhosts")  # listing is allowed; changing is not offered...
    expect(console.test_id("vhost-/")).to_be_visible()
    expect(console.test_id("admin-read-only")).to_be_visible()
    expect(console.test_id("vhost-delete")).to_have_count(0)
    expect(console.test_id("vhost-create")).to_have_count(0)
    # ...and would be refused by the API, which checks every action
    assert api.as_user("watcher", "pw").delete("/api/vhosts/%2F").status == 401
    assert api.get("/api/vhosts/%2F").status == 200

    console.go("#/admin/feature-flags")  # monitoring may read the flags, not enable them
    expect(console.test_id("feature-flags-table")).to_be_visible()
    expect(console.test_id("admin-read-only")).to_be_visible()
    console.go("#/admin/operator-policies")
    expect(console.test_id("admin-error")).to_have_text("Not administrator user")
    assert console.test_id("who").inner_text() == "watcher (monitoring)"


def test_a_policymaker_lands_on_policies_and_makes_one(open_console, node, api):
    node.add_user("pm", "pw", ("policymaker",))
    node.set_permissions("pm", "/")
    console = open_console("pm", "pw")
    console.test_id("nav-admin").click()
    expect(console.test_id("admin-tab-policies")).to_have_attribute("aria-current", "page")
    expect(console.test_id("admin-read-only")).to_have_count(0)
    form = console.test_id("policy-create")
    form.get_by_label("Name", exact=True).fill("pm-cap")
    form.get_by_label("Pattern").fill("^pm\\.")
    form.get_by_label("Definition (JSON)").fill('{"max-length": 1}')
    console.test_id("policy-create-submit").click()
    expect(console.test_id("policy-/-pm-cap")).to_be_visible()
    assert api.get("/api/policies/%2F/pm-cap").body["definition"] == {"max-length": 1}
    console.test_id("admin-tab-users").click()  # users are the administrator's
    expect(console.test_id("admin-error")).to_have_text("Not administrator user")
