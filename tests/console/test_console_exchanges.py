"""The console's Exchanges and Exchange pages (node/http/console/pages/
exchanges.js, exchange.js) in headless Chromium against a real node: the
list pages and filters on the server, an exchange declared, bound, published
to and deleted from the pages, the message fetched from the bound queue
through the HTTP API."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_publish_from_an_exchange_page_reaches_a_bound_queue(console, api):
    assert api.put("/api/queues/%2F/eu-orders", {"durable": True}).status == 201
    console.go("#/exchanges")
    create = console.test_id("exchange-create")
    create.get_by_label("Name", exact=True).fill("orders")
    console.test_id("exchange-create-type").select_option("topic")
    console.test_id("exchange-create-submit").click()  # declared, and its page opens
    expect(console.test_id("exchange-name")).to_have_text("orders")
    assert api.get("/api/exchanges/%2F/orders").body["type"] == "topic"
    console.go("#/exchanges")
    console.test_id("exchange-/-orders").locator('[data-test="exchange-link"]').click()
    expect(console.test_id("exchange-name")).to_have_text("orders")
    bind = console.test_id("binding-create")
    bind.get_by_label("Name", exact=True).fill("eu-orders")
    bind.get_by_label("Routing key").fill("eu.*")
    console.test_id("binding-create-submit").click()
    expect(console.test_id("binding-queue-eu-orders-eu.*")).to_be_visible()
    bindings = api.get("/api/exchanges/%2F/orders/bindings/source").body
    assert [(b["destination"], b["routing_key"]) for b in bindings] == [("eu-orders", "eu.*")]

    publish = console.test_id("publish")
    publish.get_by_label("Routing key").fill("eu.paris")
    console.test_id("publish-delivery_mode").select_option("2")
    publish.get_by_label("Headers (JSON)").fill('{"region": "eu"}')
    publish.get_by_label("Properties (JSON)").fill('{"message_id": "m-1"}')
    console.test_id("publish-payload").fill("hello from the console")
    console.test_id("publish-submit").click()
    expect(console.test_id("publish-result")).to_have_text("Message published and routed.")
    got = api.post("/api/queues/%2F/eu-orders/get", {"count": 5, "ackmode": "ack_requeue_false", "encoding": "auto"})
    assert [m["payload"] for m in got.body] == ["hello from the console"]
    message = got.body[0]
    assert (message["exchange"], message["routing_key"]) == ("orders", "eu.paris")
    assert message["properties"]["headers"] == {"region": "eu"} and message["properties"]["delivery_mode"] == 2
    assert message["properties"]["message_id"] == "m-1"

    publish.get_by_label("Routing key").fill("us.boston")  # no binding matches: the API says so, the page too
    console.test_id("publish-submit").click()
    expect(console.test_id("publish-result")).to_contain_text("not routed")
    publish.get_by_label("Headers (JSON)").fill("[1, 2]")
    console.test_id("publish-submit").click()
    expect(console.test_id("publish-error")).to_have_text('Headers must be a JSON object, like {"key": "value"}')

    console.test_id("binding-queue-eu-orders-eu.*").locator('[data-test="binding-delete"]').click()
    expect(console.test_id("binding-queue-eu-orders-eu.*")).to_have_count(0)
    assert api.get("/api/exchanges/%2F/orders/bindings/source").body == []

    console.test_id("exchange-delete").click()  # the fixture accepts confirm(); back to the list
    expect(console.page.locator('[data-page="exchanges"] h1')).to_have_text("Exchanges")
    expect(console.test_id("exchange-/-orders")).to_have_count(0)
    assert api.get("/api/exchanges/%2F/orders").status == 404


def test_bindings_to_an_exchange_and_publishing_through_the_default_exchange(console, api):
    for name, kind in (("upstream", "fanout"), ("downstream", "direct")):
        assert api.put(f"/api/exchanges/%2F/{name}", {"type": kind}).status == 201
    assert api.put("/api/queues/%2F/plain", {"durable": True}).status == 201
    console.go("#/exchange/%2F/upstream")
    console.test_id("binding-create-kind").select_option("exchange")
    console.test_id("binding-create").get_by_label("Name", exact=True).fill("downstream")
    console.test_id("binding-create-submit").click()
    expect(console.test_id("bindings-source")).to_contain_text("downstream")
    console.go("#/exchange/%2F/downstream")  # seen from the other end
    expect(console.test_id("bindings-destination")).to_contain_text("upstream")
    # the default exchange: bound to every queue by its name, said once rather than listed per queue
    console.go("#/exchange/%2F/amq.default")
    expect(console.test_id("exchange-name")).to_have_text("(AMQP default)")
    expect(console.test_id("bindings-source")).to_contain_text("bound to every queue")
    console.test_id("publish").get_by_label("Routing key").fill("plain")  # the queue's name
    console.test_id("publish-payload").fill("by name")
    console.test_id("publish-submit").click()
    expect(console.test_id("publish-result")).to_have_text("Message published and routed.")
    got = api.post("/api/queues/%2F/plain/get", {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"})
    assert [m["payload"] for m in got.body] == ["by name"]
    expect(console.test_id("binding-delete")).to_have_count(0)
    expect(console.test_id("binding-create")).to_have_count(0)
    expect(console.test_id("exchange-delete")).to_have_count(0)


def test_the_exchange_list_pages_sorts_and_filters_on_the_server(console, api):
    for i in range(30):
        assert api.put(f"/api/exchanges/%2F/x-{i:02}", {"type": "direct"}).status == 201
    console.go("#/exchanges")
    summary = console.test_id("exchanges-summary")
    expect(summary).to_have_text("Page 1 of 1: 36 shown, 36 matching, 36 in all")  # 6 built in
    console.test_id("exchanges-page-size").select_option("20")  # applies at once
    expect(summary).to_have_text("Page 1 of 2: 20 shown, 36 matching, 36 in all")
    console.test_id("exchanges-filter").fill("x-")
    console.test_id("exchanges-filter").press("Enter")
    expect(summary).to_have_text("Page 1 of 2: 20 shown, 30 matching, 36 in all")
    rows = console.test_id("exchanges").locator("tbody tr")
    expect(rows.first).to_have_attribute("data-test", "exchange-/-x-00")
    console.test_id("exchanges-next").click()
    expect(summary).to_have_text("Page 2 of 2: 10 shown, 30 matching, 36 in all")
    expect(rows.first).to_have_attribute("data-test", "exchange-/-x-20")
    expect(console.test_id("exchanges-next")).to_be_disabled()

    console.test_id("exchanges").locator('button[data-sort="name"]').click()  # again: descending, from page 1
    expect(summary).to_contain_text("Page 1 of 2")
    expect(rows.first).to_have_attribute("data-test", "exchange-/-x-29")

    console.test_id("exchanges-filter").fill("^x-0[0-4]$")
    console.test_id("exchanges-regex").check()
    console.test_id("exchanges-filter").press("Enter")
    expect(summary).to_have_text("Page 1 of 1: 5 shown, 5 matching, 36 in all")
    console.test_id("exchanges-filter").fill("(")  # the API's 400, shown
    console.test_id("exchanges-filter").press("Enter")
    expect(console.test_id("toast").last).to_contain_text("invalid name filter regex")
