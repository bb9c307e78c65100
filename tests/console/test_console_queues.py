"""The queue pages of the web console in headless Chromium, against a real
node and real clients: a queue declared by the official client shows up and
its count moves while messages flow; publish, get (requeue and ack), purge
and delete from the page; a quorum queue's replicas and a stream's log; the
list is paged, filtered and sorted by the server."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect
from proton.utils import BlockingConnection
from rabbitmq_amqp_python_client import (
    AddressHelper,
    Converter,
    Environment,
    Message,
    OutcomeState,
    QuorumQueueSpecification,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def count(console, key: str):
    return console.page.locator(f'[data-test="queue-counts"] [data-count="{key}"] b')


def open_queue(console, name: str, vhost: str = "%2F") -> None:
    console.go(f"#/queue/{vhost}/{name}")
    expect(console.test_id("queue-name")).to_have_text(name)


def test_a_queue_declared_by_a_client_shows_and_its_count_moves(console, node):
    environment = Environment(uri=f"amqp://guest:guest@localhost:{node.port}/")
    connection = environment.connection()
    connection.dial()
    try:
        management = connection.management()
        management.declare_queue(QuorumQueueSpecification(name="orders"))
        console.go("#/queues")
        link = console.page.get_by_role("link", name="orders", exact=True)
        expect(link).to_be_visible()
        link.click()
        expect(console.test_id("queue-name")).to_have_text("orders")
        expect(count(console, "messages")).to_have_text("0")
        publisher = connection.publisher(AddressHelper.queue_address("orders"))
        for step in (1, 2, 3):  # the page follows each step of the flow
            for _ in range(5):
                status = publisher.publish(Message(body=Converter.string_to_bytes("order")))
                assert status.remote_state == OutcomeState.ACCEPTED
            expect(count(console, "messages")).to_have_text(str(5 * step))
        publisher.close()
        assert management.purge_queue("orders") == 15
        expect(count(console, "messages")).to_have_text("0")
        management.close()
    finally:
        environment.close()


def test_publish_and_get_a_message_from_the_page(console, api):
    assert api.put("/api/queues/%2F/inbox").status == 201
    open_queue(console, "inbox")
    page = console.page
    page.get_by_label("Payload").fill("hello from the console")
    page.get_by_role("button", name="Publish").click()
    expect(console.test_id("toast").last).to_have_text("Message published")
    expect(count(console, "messages")).to_have_text("1")
    # requeued: the message is shown and stays
    page.get_by_label("Ack mode").select_option("ack_requeue_true")
    page.get_by_role("button", name="Get messages").click()
    expect(console.test_id("message-payload")).to_have_text("hello from the console")
    assert api.get("/api/queues/%2F/inbox").body["messages"] == 1
    # acked: gone from the queue
    page.get_by_label("Ack mode").select_option("ack_requeue_false")
    page.get_by_role("button", name="Get messages").click()
    expect(count(console, "messages")).to_have_text("0")
    assert api.get("/api/queues/%2F/inbox").body["messages"] == 0
    page.get_by_role("button", name="Get messages").click()
    expect(console.test_id("got-messages")).to_have_text("The queue is empty.")


def test_purge_then_delete_a_queue(console, api):
    assert api.put("/api/queues/%2F/doomed").status == 201
    for i in range(3):
        body = {"routing_key": "doomed", "payload": f"m{i}", "payload_encoding": "string", "properties": {}}
        assert api.post("/api/exchanges/%2F/amq.default/publish", body).body == {"routed": True}
    open_queue(console, "doomed")
    expect(count(console, "messages")).to_have_text("3")
    console.test_id("purge").click()  # confirm() is accepted by the fixture
    expect(count(console, "messages")).to_have_text("0")
    assert api.get("/api/queues/%2F/doomed").body["messages"] == 0
    console.test_id("delete-queue").click()
    expect(console.page.locator('[data-page="queues"] h1')).to_be_visible()
    assert api.get("/api/queues/%2F/doomed").status == 404
    expect(console.page.get_by_role("link", name="doomed", exact=True)).to_have_count(0)


def test_an_action_the_api_refuses_is_shown_and_the_session_stays(open_console, node, api):
    """RabbitMQ's 401 "not_authorised" for a refused action is no failed login: the page says why."""
    node.add_user("watcher", "pw", ("monitoring",))
    node.set_permissions("watcher", "/", configure="^$", write="^$", read=".*")
    assert api.put("/api/queues/%2F/kept").status == 201
    console = open_console("watcher", "pw")
    open_queue(console, "kept")
    console.test_id("delete-queue").click()
    expect(console.test_id("toast").last).to_contain_text("configure access to queue 'kept'")
    expect(console.test_id("queue-name")).to_have_text("kept")  # still logged in, still here
    assert api.get("/api/queues/%2F/kept").status == 200


def test_declare_a_queue_from_the_list_page(console, api):
    console.go("#/queues")
    page = console.page
    page.get_by_label("Name", exact=True).fill("made-here")
    page.get_by_label("Type").select_option("stream")
    page.get_by_role("button", name="Add queue").click()
    expect(console.test_id("queue-name")).to_have_text("made-here")
    assert api.get("/api/queues/%2F/made-here").body["type"] == "stream"


def test_a_quorum_queue_shows_its_replicas_and_a_stream_its_log(console, api, node):
    assert api.put("/api/queues/%2F/qq", {"arguments": {"x-queue-type": "quorum"}}).status == 201
    open_queue(console, "qq")
    replicas = console.test_id("replicas")
    expect(replicas.locator("tbody tr")).to_have_count(1)
    expect(replicas.locator("tbody tr td").nth(1)).to_have_text("leader")
    expect(replicas.locator("tbody tr td").nth(0)).to_have_text("warren@test")
    # a replica on a node that is no member: the API's refusal is shown, nothing changes
    console.page.get_by_label("Node", exact=True).fill("warren@nowhere")
    console.page.get_by_role("button", name="Add or move replica").click()
    expect(console.test_id("toast").last).to_contain_text("nowhere")
    expect(replicas.locator("tbody tr")).to_have_count(1)

    assert api.put("/api/queues/%2F/events", {"arguments": {"x-queue-type": "stream"}}).status == 201
    for i in range(4):
        body = {"routing_key": "events", "payload": f"e{i}", "payload_encoding": "string", "properties": {}}
        assert api.post("/api/exchanges/%2F/amq.default/publish", body).body == {"routed": True}
    open_queue(console, "events")
    facts = console.test_id("stream-facts")
    expect(facts).to_contain_text("First offset0")
    expect(facts).to_contain_text("Last (committed) offset3")
    expect(facts).to_contain_text("Segments1")
    expect(console.page.locator("main")).not_to_contain_text("null")  # no section of another type left behind


def listing_request(console, action):
    """The /api/queues request that `action` makes the page send, as its query."""
    with console.page.expect_request(lambda r: urlparse(r.url).path == "/api/queues") as request:
        action()
    return {k: v[0] for k, v in parse_qs(urlparse(request.value.url).query).items()}


def test_the_queue_list_is_paged_filtered_and_sorted_by_the_server(console, node):
    for i in range(150):
        node.declare_queue(f"q-{i:03d}", durable=False)
    page = console.page
    query = listing_request(console, lambda: console.go("#/queues"))
    assert query == {"page": "1", "page_size": "100", "sort": "name"}  # never the whole list
    rows = console.test_id("queues").locator("tbody tr")
    expect(rows).to_have_count(100)
    expect(console.test_id("queues-summary")).to_have_text("Page 1 of 2: 100 shown, 150 matching, 150 in all")

    query = listing_request(console, lambda: console.test_id("queues-next").click())
    assert query["page"] == "2"
    expect(rows).to_have_count(50)
    expect(rows.first.locator("td").nth(1)).to_have_text("q-100")

    def filter_():
        page.get_by_label("Filter by name").fill("q-01")
        page.get_by_label("Filter by name").press("Enter")

    query = listing_request(console, filter_)
    assert query["name"] == "q-01" and query["page"] == "1"
    expect(rows).to_have_count(10)
    expect(console.test_id("queues-summary")).to_have_text("Page 1 of 1: 10 shown, 10 matching, 150 in all")

    def regex():
        page.get_by_label("Filter by name").fill("^q-14[5-9]$")
        page.get_by_label("Regular expression").check()
        page.get_by_role("button", name="Apply").click()

    query = listing_request(console, regex)
    assert query["use_regex"] == "true"
    expect(rows).to_have_count(5)

    sort = console.test_id("queues").get_by_role("button", name=re.compile("^Name"))
    query = listing_request(console, lambda: sort.press("Enter"))  # the keyboard; the active sort again: reversed
    assert query["sort"] == "name" and query["sort_reverse"] == "true"
    expect(rows.first.locator("td").nth(1)).to_have_text("q-149")
    expect(console.test_id("queues").locator('th[aria-sort="descending"]')).to_have_count(1)


def test_close_a_connection_from_its_page(console, node, api):
    client = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{node.port}", timeout=10)
    try:
        api.put("/api/queues/%2F/watched")
        client.create_receiver("/queues/watched", credit=7)
        console.go("#/connections")
        console.test_id("connection-link").click()
        expect(console.test_id("outgoing-links")).to_contain_text("/queues/watched")
        expect(console.test_id("connection-details")).to_contain_text("AMQP 1-0")
        console.test_id("close-connection").click()
        expect(console.page.locator('[data-page="connections"] h1')).to_be_visible()
        expect(console.test_id("connections")).to_have_text("None yet.")
        assert api.get("/api/connections").body == []
    finally:
        try:
            client.close()
        except Exception:
            pass  # closed by the broker, as the test wants
