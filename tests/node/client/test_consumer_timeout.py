"""Consumer timeouts (issue 31; RabbitMQ 4.3's design, consumer_timeouts.md):
a consumer that holds a message unsettled past the timeout loses its link
with amqp:resource-limit-exceeded and the message goes to another consumer.
The timeout is x-consumer-timeout, else the policy key consumer-timeout (the
smaller of the two when both are set), else the node setting consumer_timeout;
through python-qpid-proton."""

from __future__ import annotations

import pytest
from mgmt_client import Api
from proton import Message, Timeout
from proton.utils import BlockingConnection, LinkDetached

pytestmark = pytest.mark.timeout(60)


def declare(api, name: str, **arguments) -> None:
    r = api.put(f"/api/queues/%2F/{name}", {"durable": True, "arguments": arguments})
    assert r.status == 201, r.body


def times_out(node, queue: str) -> None:
    """A consumer sits on a message: its link is detached and another consumer gets the message."""
    slow_conn = BlockingConnection(node.url, timeout=10)
    fast_conn = BlockingConnection(node.url, timeout=10)
    try:
        slow = slow_conn.create_receiver(f"/queues/{queue}", name="slow", credit=1)
        slow_conn.create_sender(f"/queues/{queue}").send(Message(body="held"))
        assert slow.receive(timeout=10).body == "held"  # and never settled
        fast = fast_conn.create_receiver(f"/queues/{queue}", name="fast", credit=1)
        with pytest.raises(LinkDetached) as detached:
            slow.receive(timeout=15)
        condition = detached.value.link.remote_condition
        assert condition.name == "amqp:resource-limit-exceeded"
        assert "consumer timeout" in condition.description and f"queue '{queue}'" in condition.description
        again = fast.receive(timeout=10)
        assert again.body == "held" and not again.first_acquirer and again.delivery_count == 0
        fast.accept()
    finally:
        slow_conn.close()
        fast_conn.close()


def test_a_quorum_consumer_past_x_consumer_timeout_loses_its_link_and_the_message_moves_on(api, node):
    declare(api, "qq", **{"x-queue-type": "quorum", "x-consumer-timeout": 1000})
    times_out(node, "qq")
    assert api.get("/api/queues/%2F/qq").body["messages"] == 0


def test_the_consumer_timeout_policy_key_on_a_quorum_queue(api, node):
    declare(api, "by-policy", **{"x-queue-type": "quorum", "x-consumer-timeout": 3_600_000})
    body = {"pattern": "^by-policy$", "apply-to": "quorum_queues", "definition": {"consumer-timeout": 1000}}
    assert api.put("/api/policies/%2F/short", body).status == 201  # the smaller of the two wins
    times_out(node, "by-policy")


def test_the_node_setting_times_out_classic_and_quorum_queue_consumers(broker_factory):
    node = broker_factory(consumer_timeout=1000)
    api = Api(node.broker.http_port)
    declare(api, "cq")  # no argument, no policy: the node's consumer_timeout
    times_out(node, "cq")
    declare(api, "qq", **{"x-queue-type": "quorum"})
    times_out(node, "qq")


def test_a_short_x_consumer_timeout_on_a_classic_queue(api, node):
    declare(api, "cq", **{"x-consumer-timeout": 1000})
    times_out(node, "cq")


def test_streams_refuse_the_consumer_timeout(api):
    r = api.put("/api/queues/%2F/s", {"durable": True, "arguments": {"x-queue-type": "stream",
                                                                      "x-consumer-timeout": 1000}})  # fmt: skip
    assert r.status == 400 and "x-consumer-timeout is not supported on a stream" in r.body["reason"], r.body
    body = {"pattern": "^s$", "apply-to": "streams", "definition": {"consumer-timeout": 1000}}
    r = api.put("/api/policies/%2F/s", body)
    assert r.status == 400 and "does not apply to streams" in r.body["reason"], r.body


def test_bad_values_are_refused(api):
    for value in (0, -1, "1000"):
        r = api.put("/api/queues/%2F/bad", {"durable": True, "arguments": {"x-queue-type": "quorum",
                                                                            "x-consumer-timeout": value}})  # fmt: skip
        assert r.status == 400 and "x-consumer-timeout" in r.body["reason"], r.body
        r = api.put("/api/queues/%2F/bad", {"durable": True, "arguments": {"x-consumer-timeout": value}})
        assert r.status == 400 and "x-consumer-timeout" in r.body["reason"], r.body


def test_without_the_feature_flag_quorum_queues_refuse_it_naming_the_flag(broker_factory, tmp_path, monkeypatch):
    """A node that does not support quorum_consumer_timeout (the test knob) keeps it off: every
    member could not apply the version 2 ticks, so a quorum queue is not given a timeout it would ignore."""
    monkeypatch.setenv("WARREN_TEST_UNSUPPORTED_FLAGS", "quorum_consumer_timeout")
    node = broker_factory(data_dir=tmp_path / "n", enable_test_faults=True)
    api = Api(node.broker.http_port)
    r = api.put("/api/queues/%2F/qq", {"durable": True, "arguments": {"x-queue-type": "quorum",
                                                                       "x-consumer-timeout": 1000}})  # fmt: skip
    assert r.status == 400 and "feature flag quorum_consumer_timeout" in r.body["reason"], r.body
    body = {"pattern": ".*", "apply-to": "queues", "definition": {"consumer-timeout": 1000}}
    r = api.put("/api/policies/%2F/p", body)
    assert r.status == 400 and "feature flag quorum_consumer_timeout" in r.body["reason"], r.body
    body["apply-to"] = "classic_queues"  # classic queues are one node's: no flag needed
    assert api.put("/api/policies/%2F/p", body).status == 201


def test_enabling_the_flag_times_out_what_a_quorum_consumer_already_holds(broker_factory, tmp_path, monkeypatch):
    """A cluster upgraded from a release without the flag keeps it off (the node setting does not
    apply to quorum queues meanwhile); once enabled, even an idle queue's leader starts ticking."""
    monkeypatch.setenv("WARREN_TEST_UNSUPPORTED_FLAGS", "quorum_consumer_timeout")
    node = broker_factory(data_dir=tmp_path / "n", enable_test_faults=True)
    declare(Api(node.broker.http_port), "qq", **{"x-queue-type": "quorum"})
    node.stop()
    monkeypatch.delenv("WARREN_TEST_UNSUPPORTED_FLAGS")
    node = broker_factory(data_dir=tmp_path / "n", consumer_timeout=1000)  # upgraded: supports the flag
    api = Api(node.broker.http_port)
    conn = BlockingConnection(node.url, timeout=10)
    try:
        slow = conn.create_receiver("/queues/qq", name="slow", credit=1)
        conn.create_sender("/queues/qq").send(Message(body="held"))
        assert slow.receive(timeout=10).body == "held"
        with pytest.raises(Timeout):
            slow.receive(timeout=3)  # the flag is off: no timeout, its link stays
        assert api.put("/api/feature_flags/quorum_consumer_timeout/enable", {}).status in (200, 204)
        with pytest.raises(LinkDetached, match="resource-limit-exceeded"):
            slow.receive(timeout=15)
    finally:
        conn.close()
