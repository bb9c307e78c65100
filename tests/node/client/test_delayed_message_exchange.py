"""The x-delayed-message exchange on a node: declared over the HTTP API, fed by a
proton client; a delayed message reaches its queue once due and not before, an
undelayed one at once; topic routing; the refusals of a bad x-delayed-type as
400s; the counts in /api/exchanges; delayed messages kept across a restart."""

from __future__ import annotations

import time

import pytest
from mgmt_client import Api
from proton import Message, symbol
from proton.utils import BlockingConnection

from queues.base import QueueMessage

pytestmark = pytest.mark.timeout(90)


def declare(api: Api, name: str, delayed_type: str, bindings: dict[str, str]) -> None:
    reply = api.put(f"/api/exchanges/%2F/{name}", {"type": "x-delayed-message", "durable": True,
                                                   "arguments": {"x-delayed-type": delayed_type}})  # fmt: skip
    assert reply.status == 201, reply.body
    for queue, key in bindings.items():
        assert api.put(f"/api/queues/%2F/{queue}", {"durable": True}).status in (201, 204)
        assert api.post(f"/api/bindings/%2F/e/{name}/q/{queue}", {"routing_key": key}).status == 201


def delayed(body: str, delay: int | None) -> Message:
    msg = Message(body=body, durable=True)
    if delay is not None:
        msg.annotations = {symbol("x-delay"): delay}  # where RabbitMQ 4 reads it in AMQP 1.0
    return msg


def publish(url: str, address: str, messages: list[Message]) -> None:
    conn = BlockingConnection(url, timeout=10)
    try:
        sender = conn.create_sender(address)
        for msg in messages:
            sender.send(msg)  # returns once settled: accepted only when stored
    finally:
        conn.close()


def exchange_info(api: Api, name: str) -> dict:
    return api.get(f"/api/exchanges/%2F/{name}").body


def counts(info: dict) -> dict:
    return {k: v for k, v in info["message_stats"].items() if not k.endswith("_details")}


def settled(api: Api, name: str) -> dict:
    """The exchange's info once it holds no delayed message: a routed one is counted until its
    targets confirmed it and its delete is on disk, so the count is polled, with a deadline."""
    deadline = time.monotonic() + 10
    while (info := exchange_info(api, name))["messages_delayed"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert info["messages_delayed"] == 0
    return info


def arrivals_at(node, address: str, n: int, credit: int, timeout: float) -> list[tuple[str, int]]:
    """(body, the node's clock in ms when it arrived) of the next `n` messages at `address`, each
    accepted; `timeout` seconds at most for each."""
    conn = BlockingConnection(node.url, timeout=10)
    try:
        receiver = conn.create_receiver(address, credit=credit)
        arrivals = []
        for _ in range(n):
            arrivals.append((receiver.receive(timeout=timeout).body, node.broker.now_ms()))
            receiver.accept()
    finally:
        conn.close()
    return arrivals


def test_a_delayed_message_arrives_not_before_its_delay_and_an_undelayed_one_at_once(api, node):
    declare(api, "later", "direct", {"q": "k"})
    conn = BlockingConnection(node.url, timeout=10)
    try:
        receiver = conn.create_receiver("/queues/q", credit=10)
        sent_at = node.broker.now_ms()  # the node's clock, which times the delay
        # each send waits for its settlement, so the delay outlasts three quorum commits on a busy machine
        publish(node.url, "/exchanges/later/k", [delayed("late", 2000), delayed("now", None), delayed("zero", 0)])
        first = [receiver.receive(timeout=5).body, receiver.receive(timeout=5).body]
        receiver.accept()
        assert first == ["now", "zero"]  # routed at once, ahead of the delayed one sent first
        late = receiver.receive(timeout=10)  # awaits the delivery itself
        arrived = node.broker.now_ms()
        receiver.accept()
    finally:
        conn.close()
    assert late.body == "late" and arrived - sent_at >= 2000
    after = settled(api, "later")
    assert after["type"] == "x-delayed-message" and after["arguments"] == {"x-delayed-type": "direct"}
    assert counts(after) == {"publish_in": 1, "publish_out": 1}


def test_the_count_of_delayed_messages_shows_while_they_wait(api, node):
    declare(api, "slow", "fanout", {"f": ""})
    node.call(node.broker.management.sample)  # a sample before: the rate counts what follows
    publish(node.url, "/exchanges/slow", [delayed(f"m{i}", 60_000) for i in range(5)])
    info = exchange_info(api, "slow")
    assert info["message_stats"]["publish_in_details"]["rate"] > 0
    assert info["message_stats"]["publish_out_details"] == {"rate": 0.0}
    listed = {x["name"]: x for x in api.get("/api/exchanges").body}["slow"]  # the listings show it too
    assert counts(listed) == counts(info) and listed["messages_delayed"] == info["messages_delayed"]
    assert info["messages_delayed"] == 5 and info["message_stats"]["publish_in"] == 5
    assert api.get("/api/queues/%2F/f").body["messages"] == 0
    backing = api.get("/api/queues/%2F/amq.delayed.slow").body  # where they wait, replicated
    assert backing["type"] == "quorum" and backing["messages"] == 5
    assert api.delete("/api/exchanges/%2F/slow").status == 204
    assert api.get("/api/queues/%2F/amq.delayed.slow").status == 404  # the delayed messages go with it


def test_a_delayed_topic_exchange_routes_by_key_once_due(api, node):
    declare(api, "topics", "topic", {"qa": "a.*", "qb": "#.b"})
    publish(node.url, "/exchanges/topics/a.x", [delayed("to-a", 100)])
    publish(node.url, "/exchanges/topics/z.b", [delayed("to-b", 100)])
    publish(node.url, "/exchanges/topics/a.b", [delayed("to-both", 100)])
    publish(node.url, "/exchanges/topics/nowhere", [delayed("dropped", 100)])
    conn = BlockingConnection(node.url, timeout=10)
    try:
        got = {}
        for queue in ("qa", "qb"):
            receiver = conn.create_receiver(f"/queues/{queue}", credit=10)
            got[queue] = {receiver.receive(timeout=10).body, receiver.receive(timeout=10).body}
            receiver.accept()
    finally:
        conn.close()
    assert got == {"qa": {"to-a", "to-both"}, "qb": {"to-b", "to-both"}}
    assert counts(settled(api, "topics")) == {"publish_in": 4, "publish_out": 3}  # one reached no queue


def test_a_missing_or_bad_x_delayed_type_is_refused_naming_it(api):
    for arguments in ({}, {"x-delayed-type": "x-consistent-hash"}, {"x-delayed-type": 3}):
        reply = api.put("/api/exchanges/%2F/bad", {"type": "x-delayed-message", "arguments": arguments})
        assert reply.status == 400 and "x-delayed-type" in str(reply.body), reply.body
    assert api.get("/api/exchanges/%2F/bad").status == 404
    overview = api.get("/api/overview").body
    assert "x-delayed-message" in [t["name"] for t in overview["exchange_types"]]


def test_delayed_messages_survive_a_restart(broker_factory, tmp_path):
    node = broker_factory(tmp_path / "data")
    api = Api(node.broker.http_port)
    declare(api, "kept", "direct", {"kq": "k"})
    sent_at = node.broker.now_ms()
    publish(node.url, "/exchanges/kept/k", [delayed(f"m{i}", 1500 + 10 * i) for i in range(20)])
    assert exchange_info(api, "kept")["messages_delayed"] == 20
    node.stop()
    node = broker_factory(tmp_path / "data")
    api = Api(node.broker.http_port)
    conn = BlockingConnection(node.url, timeout=10)
    try:
        receiver = conn.create_receiver("/queues/kq", credit=100)
        bodies = []
        for _ in range(20):
            bodies.append(receiver.receive(timeout=15).body)
            receiver.accept()
        arrived = node.broker.now_ms()
    finally:
        conn.close()
    assert sorted(bodies) == sorted(f"m{i}" for i in range(20)) and arrived - sent_at >= 1500
    settled(api, "kept")


def test_the_delayed_messages_queue_is_the_exchanges_own(api, node):
    """No policy reaches it (a catch-all TTL or length limit would drop delayed messages), no
    one else may declare a queue under its prefix, and a definitions export leaves it out
    (declaring the exchange brings it)."""
    assert api.put("/api/policies/%2F/all", {"pattern": "^amq[.]delayed[.]", "apply-to": "queues",
                                             "definition": {"message-ttl": 50, "max-length": 1}}).status == 201  # fmt: skip
    declare(api, "guarded", "fanout", {"g": ""})
    publish(node.url, "/exchanges/guarded", [delayed(f"m{i}", 400) for i in range(3)])
    backing = api.get("/api/queues/%2F/amq.delayed.guarded").body
    assert backing["policy"] is None and backing["messages"] == 3
    assert api.delete("/api/policies/%2F/all").status == 204
    conn = BlockingConnection(node.url, timeout=10)
    try:
        receiver = conn.create_receiver("/queues/g", credit=10)
        assert sorted(receiver.receive(timeout=10).body for _ in range(3)) == ["m0", "m1", "m2"]
        receiver.accept()
    finally:
        conn.close()
    reply = api.put("/api/queues/%2F/amq.delayed.mine", {"durable": True})
    assert reply.status in (400, 403) and "amq.delayed." in str(reply.body)
    exported = api.get("/api/definitions").body
    assert "amq.delayed.guarded" not in [q["name"] for q in exported["queues"]]
    assert "guarded" in [x["name"] for x in exported["exchanges"]]


def test_a_delayed_message_reaching_the_exchange_through_another_is_delayed_too(api, node):
    """As the plugin does: the delayed exchange holds what an exchange-to-exchange binding brings."""
    declare(api, "inner", "direct", {"iq": "k"})
    assert api.put("/api/exchanges/%2F/front", {"type": "fanout"}).status == 201
    assert api.post("/api/bindings/%2F/e/front/e/inner", {"routing_key": ""}).status == 201
    conn = BlockingConnection(node.url, timeout=10)
    try:
        receiver = conn.create_receiver("/queues/iq", credit=10)
        sent_at = node.broker.now_ms()
        publish(node.url, "/exchanges/front/k", [delayed("through", 300), delayed("direct", None)])
        assert receiver.receive(timeout=5).body == "direct"
        late = receiver.receive(timeout=10)
        arrived = node.broker.now_ms()
        receiver.accept()
    finally:
        conn.close()
    assert late.body == "through" and arrived - sent_at >= 300
    assert counts(settled(api, "inner")) == {"publish_in": 1, "publish_out": 1}


def test_a_dead_letter_sent_to_a_delayed_exchange_waits_its_x_delay_and_keeps_its_death_history(api, node):
    declare(api, "retry-later", "direct", {"retried": "work"})
    assert api.put("/api/queues/%2F/work", {"durable": True, "arguments": {
        "x-message-ttl": 50, "x-dead-letter-exchange": "retry-later"}}).status == 201  # fmt: skip
    conn = BlockingConnection(node.url, timeout=10)
    try:
        receiver = conn.create_receiver("/queues/retried", credit=10)
        sent_at = node.broker.now_ms()
        publish(node.url, "/queues/work", [delayed("retry-me", 400)])
        got = receiver.receive(timeout=10)
        arrived = node.broker.now_ms()
        receiver.accept()
    finally:
        conn.close()
    assert got.body == "retry-me" and arrived - sent_at >= 50 + 400
    deaths = got.annotations[symbol("x-opt-deaths")]
    assert deaths[0][symbol("queue")] == "work" and deaths[0][symbol("reason")] == "expired"
    assert symbol("x-opt-delay-until") not in got.annotations  # the hold's own annotation stays behind


def test_past_the_memory_window_delays_wait_in_the_later_queue_and_still_arrive_in_due_order(broker_factory, tmp_path):
    """delayed_message_memory_window=10: the node holds checked out at most the window (and as
    many being moved), its scheduler's index at most the window; the rest wait as ready
    messages of amq.delayed-later.NAME. Short delays published behind long ones are seen at
    once (the inbox is read continuously) and every message arrives, none before its due time."""
    window = 10
    node = broker_factory(tmp_path / "data", delayed_message_memory_window=window)
    api = Api(node.broker.http_port)
    declare(api, "wide", "direct", {"wq": "k"})
    sent_at = node.broker.now_ms()
    long = [delayed(f"long{i}", 2500 + 25 * i) for i in range(80)]
    publish(node.url, "/exchanges/wide/k", long + [delayed(f"short{i}", 300) for i in range(5)])
    [scheduler] = node.call(node.broker.delayed.schedulers)
    later = node.queue("amq.delayed-later.wide")
    inbox = node.queue("amq.delayed.wide")
    deadline = time.monotonic() + 10  # moves done: each is counted in both queues until settled where it was
    while (later.message_count < 60 or exchange_info(api, "wide")["messages_delayed"] != 85) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert later.message_count >= 60  # past the window: on disk, a ready message each
    assert node.call(lambda: len(scheduler.index)) <= window
    assert inbox.unacked_count + later.unacked_count <= 2 * window
    assert exchange_info(api, "wide")["messages_delayed"] == 85  # both queues counted
    arrivals = arrivals_at(node, "/queues/wq", 85, credit=200, timeout=30)
    bodies = [b for b, _ in arrivals]
    assert sorted(bodies[:5]) == [f"short{i}" for i in range(5)]  # not stuck behind the long ones
    assert sorted(bodies) == sorted([f"long{i}" for i in range(80)] + [f"short{i}" for i in range(5)])
    for body, at in arrivals:
        due = 300 if body.startswith("short") else 2500 + 25 * int(body[4:])
        assert at - sent_at >= due, (body, at - sent_at)
    assert node.call(lambda: scheduler.laps) >= 2  # the later queue was read in laps
    settled(api, "wide")


def test_many_delays_due_the_same_millisecond_past_the_window_are_moved_not_churned(broker_factory, tmp_path):
    """Messages due at the same ms as the last one a cut kept are ordered by id: those past it are
    moved to the later queue once, not taken back into the window and given back forever."""
    node = broker_factory(tmp_path / "data", delayed_message_memory_window=10)
    api = Api(node.broker.http_port)
    declare(api, "ties", "direct", {"tq": "k"})
    payload = Message(body="same ms", durable=True).encode()

    def publish_same_due():  # one DelayedPublish: one due time for all of them
        delayed_publish = node.broker.delayed.publisher(node.vhost, "ties", 60_000)
        for _ in range(60):
            delayed_publish.publish(QueueMessage(0, payload, True, None, 0, False, "ties", ["k"]), None)

    node.call(publish_same_due)
    later = node.queue("amq.delayed-later.ties")
    deadline = time.monotonic() + 10
    while later.message_count < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert later.message_count >= 50, later.message_count  # 10 held at most, the rest on disk
    [scheduler] = node.call(node.broker.delayed.schedulers)
    assert node.call(lambda: len(scheduler.index)) <= 10
    assert exchange_info(api, "ties")["messages_delayed"] == 60


def test_delayed_messages_past_the_window_survive_a_restart(broker_factory, tmp_path):
    """What waits in the later queue is replicated and on disk: after a restart the scheduler
    takes a lap of it and every message still arrives, none before its due time."""
    node = broker_factory(tmp_path / "data", delayed_message_memory_window=4)
    api = Api(node.broker.http_port)
    declare(api, "kept", "direct", {"kq": "k"})
    sent_at = node.broker.now_ms()
    publish(node.url, "/exchanges/kept/k", [delayed(f"m{i}", 2000 + 20 * i) for i in range(30)])
    later = node.queue("amq.delayed-later.kept")
    deadline = time.monotonic() + 10
    # one observation of both: a move in flight (stored in the later queue, not yet settled in
    # the inbox) is counted twice for a moment, so asking again after the loop could see 31
    seen = (later.message_count, exchange_info(api, "kept")["messages_delayed"])
    while (seen[0] < 20 or seen[1] != 30) and time.monotonic() < deadline:
        time.sleep(0.05)
        seen = (later.message_count, exchange_info(api, "kept")["messages_delayed"])
    assert seen[0] >= 20 and seen[1] == 30, seen
    node.stop()
    node = broker_factory(tmp_path / "data", delayed_message_memory_window=4)
    api = Api(node.broker.http_port)
    arrivals = arrivals_at(node, "/queues/kq", 30, credit=100, timeout=20)
    assert sorted(b for b, _ in arrivals) == sorted(f"m{i}" for i in range(30))
    assert all(at - sent_at >= 2000 + 20 * int(b[1:]) for b, at in arrivals)
    settled(api, "kept")


def test_a_bad_memory_window_setting_is_refused_naming_it():
    from node.config import load

    for bad in ("0", "-3"):
        with pytest.raises(ValueError, match="delayed_message_memory_window"):
            load(env={"WARREN_DELAYED_MESSAGE_MEMORY_WINDOW": bad})
    for bad in (2.5, True, "10"):  # as a TOML file or a flag could give it
        with pytest.raises(ValueError, match="delayed_message_memory_window"):
            load(env={}, overrides={"delayed_message_memory_window": bad})
    assert load(env={"WARREN_DELAYED_MESSAGE_MEMORY_WINDOW": "500"}).delayed_message_memory_window == 500


def test_a_delayed_exchanges_queues_cannot_be_deleted_purged_or_read_by_a_user(api, node):
    """They hold the exchange's messages: refused with a 400 naming why, over HTTP and AMQP;
    deleting the exchange removes them."""
    declare(api, "own", "direct", {"oq": "k"})
    publish(node.url, "/exchanges/own/k", [delayed("kept", 60_000)])
    for name in ("amq.delayed.own", "amq.delayed-later.own"):
        reply = api.delete(f"/api/queues/%2F/{name}")
        assert reply.status == 400 and "x-delayed-message" in str(reply.body), reply.body
        reply = api.delete(f"/api/queues/%2F/{name}/contents")
        assert reply.status == 400 and "purge" in str(reply.body), reply.body
        reply = api.post(f"/api/queues/%2F/{name}/get", {"count": 1, "ackmode": "ack_requeue_false",
                                                        "encoding": "auto"})  # fmt: skip
        assert reply.status == 400 and "delayed messages" in str(reply.body), reply.body
    conn = BlockingConnection(node.url, timeout=10)
    try:
        with pytest.raises(Exception, match="x-delayed-message"):
            conn.create_receiver("/queues/amq.delayed.own", credit=10)
    finally:
        conn.close()
    assert exchange_info(api, "own")["messages_delayed"] == 1  # nothing lost to the attempts
    assert api.delete("/api/exchanges/%2F/own").status == 204
    assert api.get("/api/queues/%2F/amq.delayed.own").status == 404
    assert api.get("/api/queues/%2F/amq.delayed-later.own").status == 404
